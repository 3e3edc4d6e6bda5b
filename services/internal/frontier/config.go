package frontier

import (
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/gridcrawl/gridcrawl/contracts"
	"github.com/gridcrawl/gridcrawl/pkg/politeness"
)

// Config is the frontier configuration that MCP, loaders and crawlers must
// share: how hosts form crawl host groups and how groups map to loader
// queue shards.
type Config struct {
	// Aliases maps several hosts to one crawl host group, in the form
	// "alias=host1|host2;alias2=host3|host4" (an alias is never a valid
	// domain name). Changing it affects URLs discovered afterwards.
	Aliases string `env:"GRIDCRAWL_CHG_ALIASES"`
	// Shards is the number of loader queues (loader_pending.00 …); each
	// crawl host group always goes to the same one, and each shard has one
	// active loader at a time.
	Shards int `env:"GRIDCRAWL_LOADER_SHARDS" envDefault:"16"`
}

// MaxShards bounds Config.Shards.
const MaxShards = 256

// Validate checks c.
func (c *Config) Validate() error {
	if c.Shards < 1 || c.Shards > MaxShards {
		return fmt.Errorf("GRIDCRAWL_LOADER_SHARDS must be between 1 and %d", MaxShards)
	}
	if _, err := politeness.ParseAliases(c.Aliases); err != nil {
		return fmt.Errorf("GRIDCRAWL_CHG_ALIASES: %w", err)
	}
	return nil
}

// Grouper returns the grouping of hosts that c configures.
func (c *Config) Grouper() (Grouper, error) {
	a, err := politeness.ParseAliases(c.Aliases)
	if err != nil {
		return nil, fmt.Errorf("parse crawl host group aliases: %w", err)
	}
	g := politeness.NewGrouper(a, nil)
	return g.Lookup, nil
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

var errNoGroup = errors.New("record without crawl host group")
