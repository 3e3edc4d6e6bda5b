// Package routing decides where a URL goes: which crawl host group its host
// belongs to (by host, by configured aliases, or by IP address) and which
// loader queue shard serves that group. MCP, loaders and crawlers must agree
// on it, so its configuration is shared by all three.
package routing

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/lru"
	"github.com/gridcrawl/gridcrawl/pkg/netguard"
	"github.com/gridcrawl/gridcrawl/pkg/politeness"
)

// Config is the routing configuration that MCP, loaders and crawlers must
// share: how hosts form crawl host groups and how groups map to loader
// queue shards.
type Config struct {
	// Aliases maps several hosts to one crawl host group, in the form
	// "alias=host1|host2;alias2=host3|host4" (an alias is never a valid
	// domain name). Changing it affects URLs discovered afterwards.
	Aliases string `env:"GRIDCRAWL_CHG_ALIASES"`
	// Shards is the number of loader queues (loader_pending.00 …); each
	// crawl host group always goes to the same one, and each shard has one
	// active loader at a time. 0 is 1 on the embedded backends (one loader,
	// which files every URL in its frontier store: more shards would only
	// split the crawler's publishes) and 16 on the real ones. Changing it
	// under a running crawl delays the URLs filed under the old count by a
	// recovery lease: the sweep publishes them to their new shards.
	Shards int `env:"GRIDCRAWL_LOADER_SHARDS" envDefault:"0"`
	// ByIP groups hosts that resolve to the same IP address (aliases still
	// come first). The address is the one the loader dials: a
	// GRIDCRAWL_RESOLVE override, or the first resolved address.
	ByIP bool `env:"GRIDCRAWL_CHG_BY_IP"`
	// Resolve is the loader's host override list (see loader.Config), read
	// here so that grouping by IP agrees with dialling.
	Resolve string `env:"GRIDCRAWL_RESOLVE"`
}

// Grouper maps a host to its crawl host group id.
type Grouper func(host string) string

// HostGrouper groups by host, the default.
func HostGrouper(host string) string { return host }

// MaxShards bounds Config.Shards.
const MaxShards = 256

// Validate checks c.
func (c *Config) Validate() error {
	if c.Shards < 0 || c.Shards > MaxShards {
		return fmt.Errorf("GRIDCRAWL_LOADER_SHARDS must be between 0 (the default) and %d", MaxShards)
	}
	if _, err := politeness.ParseAliases(c.Aliases); err != nil {
		return fmt.Errorf("GRIDCRAWL_CHG_ALIASES: %w", err)
	}
	return nil
}

// ShardCount returns the number of loader shards: Shards, or its default
// on the embedded backends (embedded) or the real ones.
func (c *Config) ShardCount(embedded bool) int {
	switch {
	case c.Shards > 0:
		return c.Shards
	case embedded:
		return 1
	}
	return 16
}

// Grouper returns the grouping of hosts that c configures.
func (c *Config) Grouper() (Grouper, error) {
	a, err := politeness.ParseAliases(c.Aliases)
	if err != nil {
		return nil, fmt.Errorf("parse crawl host group aliases: %w", err)
	}
	if !c.ByIP {
		return politeness.NewGrouper(a, nil).Lookup, nil
	}
	overrides, err := netguard.ParseOverrides(c.Resolve)
	if err != nil {
		return nil, fmt.Errorf("parse GRIDCRAWL_RESOLVE: %w", err)
	}
	d := &netguard.Dialer{Overrides: overrides}
	g := politeness.NewGrouper(a, d.Lookup)
	return newCachedGrouper(func(host string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		id, err := g.Group(ctx, host)
		if err != nil {
			return politeness.NormalizeHost(host) // unresolvable: its own group
		}
		return id
	}), nil
}

// groupCacheSize and groupCacheTTL bound the cache of grouping by IP, which
// otherwise costs a DNS lookup per discovered link.
const (
	groupCacheSize = 100000
	groupCacheTTL  = 10 * time.Minute
)

func newCachedGrouper(group Grouper) Grouper {
	cache := lru.New[string, string](groupCacheSize, groupCacheTTL)
	return func(host string) string {
		if id, ok := cache.Get(host); ok {
			return id
		}
		id := group(host)
		cache.Put(host, id)
		return id
	}
}

// ShardQueue returns the loader queue of shard i of n.
func ShardQueue(i, n int) string {
	if n <= 1 {
		return contracts.QueueLoader
	}
	return fmt.Sprintf("%s.%02d", contracts.QueueLoader, i)
}

// ShardOf returns the shard of a crawl host group among n.
func ShardOf(group string, n int) int {
	if n <= 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(group))
	return int(h.Sum32() % uint32(n))
}

// ShardQueues lists the loader queues of n shards.
func ShardQueues(n int) []string {
	out := make([]string, max(n, 1))
	for i := range out {
		out[i] = ShardQueue(i, n)
	}
	return out
}

// IsShardQueue reports whether name is a loader queue (sharded or not).
func IsShardQueue(name string) bool {
	if name == contracts.QueueLoader {
		return true
	}
	var i int
	_, err := fmt.Sscanf(name, contracts.QueueLoader+".%02d", &i)
	return err == nil && name == ShardQueue(i, MaxShards)
}
