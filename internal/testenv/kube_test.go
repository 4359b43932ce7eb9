package testenv

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// TestKubeAPIServer plays the kubelet: a pod created through the API, its
// status written through the status subresource, listed back by label
// through the kubeconfig file, and again after a restart; KubeUser's access
// follows the authorization mode and survives the restart.
func TestKubeAPIServer(t *testing.T) {
	for _, tc := range []struct {
		authz KubeAuthorization
		// userMayList: whether KubeUser may list the namespace's pods
		// before the test grants it anything.
		userMayList bool
	}{
		{KubeRBAC, false},
		{KubeAlwaysAllow, true},
	} {
		t.Run(string(tc.authz), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			k := KubeAPIServer(t, tc.authz)
			const ns = "inference"
			if _, err := k.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create namespace: %v", err)
			}

			user := kubeClient(t, k.WriteKubeconfig(t, k.UserToken))
			_, err := user.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if tc.userMayList {
				if err != nil {
					t.Fatalf("%s lists pods under %s: %v, want allowed", KubeUser, tc.authz, err)
				}
			} else {
				if !apierrors.IsForbidden(err) {
					t.Fatalf("%s lists pods under %s: %v, want 403 Forbidden", KubeUser, tc.authz, err)
				}
				grantPodReader(ctx, t, k.Client, ns, KubeUser)
				waitAllowed(ctx, t, user, ns)
			}

			pod, err := k.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "sglang-0", Labels: map[string]string{"app": "sglang", "role": "decode"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "engine", Image: "sglang:latest",
					Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 30000}},
				}}},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("create pod: %v", err)
			}
			// What a kubelet reports once the container runs and its
			// readiness probe passes.
			now := metav1.Now()
			pod.Status = corev1.PodStatus{
				Phase:      corev1.PodRunning,
				PodIP:      "127.0.0.1",
				PodIPs:     []corev1.PodIP{{IP: "127.0.0.1"}},
				HostIP:     "127.0.0.1",
				StartTime:  &now,
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}},
			}
			if _, err := k.Client.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
				t.Fatalf("update pod status: %v", err)
			}

			want := []podView{{Name: "sglang-0", Labels: map[string]string{"app": "sglang", "role": "decode"}, IP: "127.0.0.1", Phase: corev1.PodRunning, Ready: true}}
			admin := kubeClient(t, k.Kubeconfig)
			checkPods := func(when string) {
				t.Helper()
				for _, c := range []struct {
					name   string
					client kubernetes.Interface
				}{{"admin", admin}, {"user", user}} {
					if diff := cmp.Diff(want, listPods(ctx, t, c.client, ns, "app=sglang")); diff != "" {
						t.Errorf("%s %s: pods app=sglang (-want +got):\n%s", c.name, when, diff)
					}
				}
			}
			checkPods("before the restart")
			if got := listPods(ctx, t, admin, ns, "app=vllm"); len(got) != 0 {
				t.Errorf("pods app=vllm = %v, want none", got)
			}

			k.Stop()
			if _, err := admin.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err == nil {
				t.Fatalf("%s answers after Stop", k.URL)
			}
			k.Restart(t)
			checkPods("after the restart")
		})
	}
}

// TestKubeServiceAccountToken: a token the API server issues for a service
// account (TokenRequest, signed with the key made at start) authenticates,
// as a pod's mounted token does for discovery running in the cluster.
func TestKubeServiceAccountToken(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	k := KubeAPIServer(t, KubeRBAC)
	const ns = "default"
	if _, err := k.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "kvwatch"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create service account: %v", err)
	}
	tok, err := k.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "kvwatch", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("request token: %v", err)
	}
	sa := kubeClient(t, k.WriteKubeconfig(t, tok.Status.Token))
	_, err = sa.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("service account lists pods before its RoleBinding: %v, want 403 Forbidden", err)
	}
	grantPodReader(ctx, t, k.Client, ns, "system:serviceaccount:"+ns+":kvwatch")
	waitAllowed(ctx, t, sa, ns)
}

func TestKubeAPIServerBinaryLookup(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "kube-apiserver")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(KubeAPIServerEnv, exe)
	if got := kubeAPIServerBinary(t); got != exe {
		t.Errorf("with %s=%s: got %q", KubeAPIServerEnv, exe, got)
	}
	root, ok := repoRoot()
	if !ok {
		t.Fatal("no repository root above the test's directory")
	}
	if b, err := os.ReadFile(filepath.Join(root, "tools", "kube-apiserver", "build.sh")); err != nil || len(b) == 0 {
		t.Errorf("repoRoot() = %s, which has no tools/kube-apiserver/build.sh: %v", root, err)
	}
}

// podView is what discovery reads from a pod.
type podView struct {
	Name   string
	Labels map[string]string
	IP     string
	Phase  corev1.PodPhase
	Ready  bool
}

func listPods(ctx context.Context, t *testing.T, c kubernetes.Interface, ns, selector string) []podView {
	t.Helper()
	l, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatalf("list pods %s: %v", selector, err)
	}
	var out []podView
	for _, p := range l.Items {
		v := podView{Name: p.Name, Labels: p.Labels, IP: p.Status.PodIP, Phase: p.Status.Phase}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				v.Ready = c.Status == corev1.ConditionTrue
			}
		}
		out = append(out, v)
	}
	return out
}

// kubeClient is a client from a kubeconfig file, loaded as Prometheus'
// kubeconfig_file is.
func kubeClient(t *testing.T, kubeconfig string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("load %s: %v", kubeconfig, err)
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// grantPodReader lets user (a user name or a service account's
// system:serviceaccount:NS:NAME) get, list and watch the pods of ns.
func grantPodReader(ctx context.Context, t *testing.T, c kubernetes.Interface, ns, user string) {
	t.Helper()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}},
	}
	if _, err := c.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create role: %v", err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "pod-reader-"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-reader"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if _, err := c.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create role binding: %v", err)
	}
}

// waitAllowed waits for c to be allowed to list the pods of ns: the RBAC
// authorizer sees a new RoleBinding through its watch, a moment later.
func waitAllowed(ctx context.Context, t *testing.T, c kubernetes.Interface, ns string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err == nil {
			return
		}
		if !apierrors.IsForbidden(err) || time.Now().After(deadline) {
			t.Fatalf("list pods after the RoleBinding: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
