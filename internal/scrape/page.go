package scrape

import (
	"bytes"
	"context"
	"fmt"

	"github.com/kvwatch/kvwatch/internal/expo"
)

// Page fetches t's metrics page once, with t's client (auth, TLS, timeout),
// and returns every sample on it, unnormalized: for tools that look at
// the exposition itself (`kvwatch check queries`) rather than at the KV
// model. The returned samples' __name__ labels hold the names exactly as
// exposed; their Name fields are expo's canonical form.
func (s *Scraper) Page(ctx context.Context, t *Target) (*expo.Page, error) {
	ctx, cancel := context.WithTimeout(ctx, t.Timeout)
	defer cancel()
	u := *t.URL
	body, ctype, _, err := s.fetch(ctx, t, &u, nil, new(bytes.Buffer))
	if err != nil {
		return nil, err
	}
	page, err := expo.Parse(body, ctype, nil)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", u.Redacted(), err)
	}
	return page, nil
}
