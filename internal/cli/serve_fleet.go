package cli

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/alecthomas/kingpin/v2"
	promcfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"

	"github.com/kvwatch/kvwatch/internal/app"
	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/serve"
)

// fleetFlags are serve's flags for running past one machine: sharding the
// targets over several serve instances and pushing to remote-write stores.
// See docs/stack.md ("Past one machine") and docs/configuration.md.
type fleetFlags struct {
	shard serve.Shard

	rwURLs         []string
	rwLabels       []string
	rwBearerFile   string
	rwUser         string
	rwPasswordFile string
	rwCAFile       string
	rwCertFile     string
	rwKeyFile      string
	rwInsecureTLS  bool
	rwCapacity     int
	rwInterval     string
	rwTimeout      string
	rwJob          string
	rwInstance     string
}

// shardValue parses --shard.
type shardValue struct{ s *serve.Shard }

func (v shardValue) Set(s string) error {
	sh, err := serve.ParseShard(s)
	if err != nil {
		return err
	}
	*v.s = sh
	return nil
}

func (v shardValue) String() string { return v.s.String() }

func (f *fleetFlags) register(c *kingpin.CmdClause) {
	c.Flag("shard", "Scrape only shard N of M (counted from 0) of the targets: those whose host:port hashes to N, as Prometheus' hashmod relabeling on __address__; run M serve instances with the same config, --shard 0/M to --shard M-1/M.").PlaceHolder("N/M").SetValue(shardValue{&f.shard})
	c.Flag("remote-write.url", "Push the exported kvwatch_* series to this remote-write endpoint (Prometheus remote write 1.0), e.g. http://127.0.0.1:8428/api/v1/write; repeat for several. More settings: the config file's remote_write section.").PlaceHolder("URL").StringsVar(&f.rwURLs)
	c.Flag("remote-write.external-label", "Label added to every pushed series that lacks it, as NAME=VALUE (like Prometheus' external_labels); repeat for several. Applies to every remote write.").PlaceHolder("NAME=VALUE").StringsVar(&f.rwLabels)
	c.Flag("remote-write.bearer-token-file", "File holding the bearer token for the --remote-write.url endpoints.").PlaceHolder("FILE").StringVar(&f.rwBearerFile)
	c.Flag("remote-write.basic-auth.username", "Basic-auth user for the --remote-write.url endpoints (with --remote-write.basic-auth.password-file).").StringVar(&f.rwUser)
	c.Flag("remote-write.basic-auth.password-file", "File holding the basic-auth password for the --remote-write.url endpoints.").PlaceHolder("FILE").StringVar(&f.rwPasswordFile)
	c.Flag("remote-write.tls.ca-file", "CA certificates to verify the --remote-write.url endpoints with.").PlaceHolder("FILE").StringVar(&f.rwCAFile)
	c.Flag("remote-write.tls.cert-file", "Client certificate for the --remote-write.url endpoints (with --remote-write.tls.key-file).").PlaceHolder("FILE").StringVar(&f.rwCertFile)
	c.Flag("remote-write.tls.key-file", "Client key for the --remote-write.url endpoints.").PlaceHolder("FILE").StringVar(&f.rwKeyFile)
	c.Flag("remote-write.tls.insecure-skip-verify", "Do not verify the --remote-write.url endpoints' certificates: only for tests.").BoolVar(&f.rwInsecureTLS)
	c.Flag("remote-write.queue-capacity", "Samples the queue of each --remote-write.url holds while the store is down; past it the oldest are dropped.").Default(strconv.Itoa(config.DefaultRemoteWriteCapacity)).IntVar(&f.rwCapacity)
	c.Flag("remote-write.send-interval", "How often the latest values are pushed; default the config's global.scrape_interval.").PlaceHolder("DURATION").StringVar(&f.rwInterval)
	c.Flag("remote-write.timeout", "Timeout of one remote-write request.").Default(model.Duration(config.DefaultRemoteWriteTimeout).String()).StringVar(&f.rwTimeout)
	c.Flag("remote-write.job", "job label of the pushed series (as when Prometheus scrapes serve as job kvwatch); an external label job wins.").Default("kvwatch").StringVar(&f.rwJob)
	c.Flag("remote-write.instance", "instance label of the pushed series; default this host's name and serve's port. An external label instance wins.").StringVar(&f.rwInstance)
}

// remotes returns the remote writes of the flags and of the config.
func (f *fleetFlags) remotes(cfg *config.Config) ([]config.RemoteWrite, error) {
	ext := map[string]string{}
	for _, l := range f.rwLabels {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--remote-write.external-label %q: want NAME=VALUE, e.g. region=eu-west", l)
		}
		ext[k] = v
	}
	var out []config.RemoteWrite
	for _, u := range f.rwURLs {
		rw := config.DefaultRemoteWrite()
		rw.URL = u
		if f.rwTimeout != "" {
			d, err := parseDuration(f.rwTimeout)
			if err != nil {
				return nil, fmt.Errorf("--remote-write.timeout: %w", err)
			}
			rw.RemoteTimeout = d
		}
		if f.rwInterval != "" {
			d, err := parseDuration(f.rwInterval)
			if err != nil {
				return nil, fmt.Errorf("--remote-write.send-interval: %w", err)
			}
			rw.SendInterval = d
		}
		rw.QueueConfig.Capacity = f.rwCapacity
		h := &rw.HTTPClientConfig
		h.BearerTokenFile = f.rwBearerFile
		if f.rwUser != "" || f.rwPasswordFile != "" {
			h.BasicAuth = &promcfg.BasicAuth{Username: f.rwUser, PasswordFile: f.rwPasswordFile}
		}
		h.TLSConfig = promcfg.TLSConfig{CAFile: f.rwCAFile, CertFile: f.rwCertFile, KeyFile: f.rwKeyFile, InsecureSkipVerify: f.rwInsecureTLS}
		// Flag-given files are relative to the working directory.
		h.SetDirectory(mustAbs("."))
		out = append(out, rw)
	}
	out = append(out, cfg.RemoteWrite...)
	for i := range out {
		if len(ext) == 0 {
			break
		}
		m := map[string]string{}
		for k, v := range ext {
			m[k] = v
		}
		for k, v := range out[i].ExternalLabels { // the entry's own win
			m[k] = v
		}
		out[i].ExternalLabels = m
	}
	return out, nil
}

// apply sets the shard and the remote writes of o from the flags: the
// flag-given stores with the config's (read again on every reload), the
// external labels on each.
func (f *fleetFlags) apply(o *app.Options) error {
	if _, err := f.remotes(config.Default()); err != nil { // the flags' own mistakes, before anything starts
		return err
	}
	o.Shard = f.shard
	o.RemoteWrite = f.remotes
	o.RemoteWriteJob, o.RemoteWriteInstance = f.rwJob, f.rwInstance
	return nil
}

func mustAbs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return a
}
