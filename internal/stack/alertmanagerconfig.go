package stack

import (
	"encoding/json"
	"fmt"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	monitoringv1alpha1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1alpha1"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Names of the Kubernetes objects that carry the Alertmanager routes.
const (
	k8sAlertmanagerConfigName = "kvwatch"
	// k8sAlertmanagerSecret holds the Slack webhook URL, which the
	// AlertmanagerConfig can only take from a Secret.
	k8sAlertmanagerSecret = "kvwatch-alertmanager"
	k8sSlackURLKey        = "slack-webhook-url"
)

// alertmanagerConfigObjects returns the Prometheus Operator's form of
// alertmanager.yml: an AlertmanagerConfig (monitoring.coreos.com/v1alpha1)
// with the same route tree, inhibitions and receivers, converted from the
// one amConfig so the two cannot drift; and, with a Slack receiver, the
// Secret holding its webhook URL. The Operator adds a matcher
// namespace="<the AlertmanagerConfig's namespace>" to its top route, which
// is why the PrometheusRule's alerts carry that namespace label
// (kubernetesFiles). Alertmanager's global settings (resolve_timeout, SMTP)
// belong to the Alertmanager object; the e-mail settings go on each e-mail
// integration instead.
func alertmanagerConfigObjects(o Options, meta func(string, map[string]string) metav1.ObjectMeta) ([]any, error) {
	c := alertmanagerConfig(o)
	route, err := k8sRoute(c.Route)
	if err != nil {
		return nil, err
	}
	spec := monitoringv1alpha1.AlertmanagerConfigSpec{Route: route}
	for _, in := range c.InhibitRules {
		spec.InhibitRules = append(spec.InhibitRules, monitoringv1alpha1.InhibitRule{
			SourceMatch: k8sMatchers(in.SourceMatchers), TargetMatch: k8sMatchers(in.TargetMatchers), Equal: in.Equal})
	}
	var secret *corev1.Secret
	for _, r := range c.Receivers {
		kr := monitoringv1alpha1.Receiver{Name: r.Name}
		for _, w := range r.WebhookConfigs {
			kr.WebhookConfigs = append(kr.WebhookConfigs, monitoringv1alpha1.WebhookConfig{URL: ptr(w.URL), SendResolved: ptr(w.SendResolved)})
		}
		for _, e := range r.EmailConfigs {
			kr.EmailConfigs = append(kr.EmailConfigs, monitoringv1alpha1.EmailConfig{To: ptr(e.To), SendResolved: ptr(e.SendResolved),
				From: ptr(c.Global.SMTPFrom), Smarthost: ptr(c.Global.SMTPSmarthost), RequireTLS: c.Global.SMTPRequireTLS})
		}
		for _, s := range r.SlackConfigs {
			if secret == nil {
				secret = &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
					ObjectMeta: meta(k8sAlertmanagerSecret, nil), StringData: map[string]string{k8sSlackURLKey: s.APIURL}}
			}
			sc := monitoringv1alpha1.SlackConfig{SendResolved: ptr(s.SendResolved), Title: ptr(s.Title), Text: ptr(s.Text),
				APIURL: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: k8sAlertmanagerSecret}, Key: k8sSlackURLKey}}
			if s.Channel != "" {
				sc.Channel = ptr(s.Channel)
			}
			kr.SlackConfigs = append(kr.SlackConfigs, sc)
		}
		spec.Receivers = append(spec.Receivers, kr)
	}
	amc := monitoringv1alpha1.AlertmanagerConfig{
		TypeMeta:   metav1.TypeMeta{APIVersion: "monitoring.coreos.com/v1alpha1", Kind: monitoringv1alpha1.AlertmanagerConfigKind},
		ObjectMeta: meta(k8sAlertmanagerConfigName, nil),
		Spec:       spec,
	}
	if secret != nil {
		return []any{amc, *secret}, nil
	}
	return []any{amc}, nil
}

// k8sRoute converts a route and its children; the Operator's CRD holds
// child routes as raw JSON.
func k8sRoute(r amRoute) (*monitoringv1alpha1.Route, error) {
	kr := &monitoringv1alpha1.Route{Receiver: r.Receiver, GroupBy: r.GroupBy, Matchers: k8sMatchers(r.Matchers), Continue: r.Continue,
		GroupWait: k8sDuration(r.GroupWait), GroupInterval: k8sDuration(r.GroupInterval), RepeatInterval: k8sDuration(r.RepeatInterval)}
	for _, child := range r.Routes {
		kc, err := k8sRoute(child)
		if err != nil {
			return nil, err
		}
		raw, err := json.Marshal(kc)
		if err != nil {
			return nil, fmt.Errorf("marshal route of %s: %w", child.Receiver, err)
		}
		kr.Routes = append(kr.Routes, apiextensionsv1.JSON{Raw: raw})
	}
	return kr, nil
}

func k8sMatchers(ms []amMatcher) []monitoringv1alpha1.Matcher {
	var out []monitoringv1alpha1.Matcher
	for _, m := range ms {
		out = append(out, monitoringv1alpha1.Matcher{Name: m.Name, Value: m.Value, MatchType: monitoringv1alpha1.MatchType(m.Op)})
	}
	return out
}

// k8sDuration is d in the Operator's duration form; zero (unset) is nil.
func k8sDuration(d model.Duration) *monitoringv1.NonEmptyDuration {
	if d == 0 {
		return nil
	}
	return ptr(monitoringv1.NonEmptyDuration(d.String()))
}
