package serve

import (
	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/engine"
	"github.com/kvwatch/kvwatch/internal/scrape"
)

// Setup is a validated configuration: the config file and every target to
// scrape, from the config file, the command line and file_sd files, as
// config.LoadTargets assembles them for every face.
type Setup struct {
	// Config is the parsed config file (defaults applied).
	Config *config.Config
	// Targets are every target, config file and command line first, then
	// file_sd targets in file name order.
	Targets []*scrape.Target
	// FileSDTargets is how many of Targets came from file_sd files.
	FileSDTargets int

	cs *config.Setup
}

// LoadSetup reads the config file (none when file is ""), adds the extra
// targets (from the command line), reads the file_sd files and checks
// everything serve needs, reporting every problem at once with its line.
// A nil reg means engine.NewRegistry(); it checks engine names.
func LoadSetup(file string, extra []config.Target, reg *engine.Registry) (*Setup, error) {
	return LoadSetupFrom(config.Sources{File: file, Extra: extra, Engines: EngineNames(reg)})
}

// SetupFromConfig checks a config built in code (e.g. by `kvwatch demo`);
// file_sd files it names are read like LoadSetup's.
func SetupFromConfig(cfg *config.Config, reg *engine.Registry) (*Setup, error) {
	return LoadSetupFrom(config.Sources{Config: cfg, Engines: EngineNames(reg)})
}

// EngineNames is reg's check of engine names for config.Sources; a nil reg
// means engine.NewRegistry().
func EngineNames(reg *engine.Registry) func(string) error {
	if reg == nil {
		reg = engine.NewRegistry()
	}
	return func(name string) error {
		_, err := reg.ByName(name)
		return err
	}
}

// LoadSetupFrom assembles the targets of src with config.LoadTargets and
// builds their scrape targets; a nil src.Engines means
// engine.NewRegistry()'s names.
func LoadSetupFrom(src config.Sources) (*Setup, error) {
	if src.Engines == nil {
		src.Engines = EngineNames(nil)
	}
	cs, err := config.LoadTargets(src)
	if err != nil {
		return nil, err
	}
	return newSetup(cs)
}

func newSetup(cs *config.Setup) (*Setup, error) {
	targets, err := scrape.Targets(&config.Config{Global: cs.Config.Global, Targets: cs.Targets})
	if err != nil {
		return nil, err
	}
	return &Setup{Config: cs.Config, Targets: targets, FileSDTargets: cs.FileSDTargets, cs: cs}, nil
}

// sdChanged reports whether the file_sd files matched now differ from those
// read into s (added, removed or modified).
func (s *Setup) sdChanged() bool { return s.cs.FileSDChanged() }

// refreshFileSD re-reads the file_sd files with the same config.
func (s *Setup) refreshFileSD() (*Setup, error) {
	cs, err := s.cs.Refresh()
	if err != nil {
		return nil, err
	}
	return newSetup(cs)
}

// sdRoles are the roles /probe accepts: a target's.
var sdRoles = config.Roles
