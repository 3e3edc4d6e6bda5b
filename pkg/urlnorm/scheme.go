package urlnorm

import "github.com/gridcrawl/gridcrawl/contracts"

// WithScheme returns s with a scheme in front when it has none, by the
// start URL rule of contracts.WithScheme, which it calls.
func WithScheme(s string) string { return contracts.WithScheme(s) }
