package routing

import "testing"

func TestGrouperAliasesAndByIP(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		want map[string]string
	}{
		{"by host", Config{}, map[string]string{"a.test": "a.test", "B.test": "b.test"}},
		{"aliases", Config{Aliases: "kommune=rana.kommune.no|vefsn.kommune.no"},
			map[string]string{"rana.kommune.no": "kommune", "vefsn.kommune.no": "kommune", "nb.no": "nb.no"}},
		{"by ip", Config{ByIP: true, Resolve: "a.test=192.0.2.1,b.test=192.0.2.1,c.test=192.0.2.2"},
			map[string]string{"a.test": "192.0.2.1", "b.test": "192.0.2.1", "c.test": "192.0.2.2", "192.0.2.1": "192.0.2.1"}},
		{"alias before ip", Config{ByIP: true, Aliases: "pair=a.test|c.test", Resolve: "a.test=192.0.2.1,c.test=192.0.2.2"},
			map[string]string{"a.test": "pair", "c.test": "pair"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g, err := tc.cfg.Grouper()
			if err != nil {
				t.Fatal(err)
			}
			for host, want := range tc.want {
				if got := g(host); got != want {
					t.Errorf("group(%q) = %q, want %q", host, got, want)
				}
			}
		})
	}
	bad := Config{Aliases: "not.an.alias=a.test", Shards: 1}
	if err := bad.Validate(); err == nil {
		t.Errorf("Validate(alias with dots) = nil, want an error")
	}
}
