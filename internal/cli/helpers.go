package cli

import (
	"fmt"

	"github.com/prometheus/common/model"
)

// parseDuration reads a Prometheus-style duration ("5s", "1m30s").
func parseDuration(s string) (model.Duration, error) {
	d, err := model.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration; write e.g. 5s or 2m", s)
	}
	return d, nil
}
