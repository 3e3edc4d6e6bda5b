package deploy_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"gopkg.in/yaml.v3"
)

// The compose file and what it must contain.
const composePath = "docker-compose.yml"

var (
	// requiredServices are the services the grid needs.
	requiredServices = []string{"rabbitmq", "elasticsearch", "minio", "mcp", "loader", "crawler"}
	// goServices are the gridcrawl binaries compose runs, by service name.
	goServices = []string{"mcp", "loader", "crawler"}
	// scalable services run as many replicas.
	scalable = []string{"loader", "crawler"}
	// backendVars must be set for every gridcrawl service: without them a
	// service falls back to embedded backends of its own container.
	backendVars = []string{
		"GRIDCRAWL_AMQP_URL", "GRIDCRAWL_ES_URL", "GRIDCRAWL_S3_ENDPOINT",
		"GRIDCRAWL_S3_ACCESS_KEY", "GRIDCRAWL_S3_SECRET_KEY", "GRIDCRAWL_S3_BUCKET",
	}
	// healthProbes are what each backend's health check must ask.
	healthProbes = map[string][]string{
		"rabbitmq":      {"rabbitmq-diagnostics", "ping"},
		"elasticsearch": {"_cluster/health"},
		"minio":         {"/minio/health/live"},
		"mcp":           {"/healthz"},
	}
)

// project is the part of a compose file the checks read, normalized from
// the file's several accepted syntaxes.
type project struct {
	services map[string]*service
	// volumes are the declared named volumes.
	volumes map[string]bool
	// extensions are the other top-level keys.
	extensions []string
}

type service struct {
	image         string
	build         *build
	command       []string
	containerName string
	hostname      string
	env           map[string]string
	ports         []portMapping
	volumes       []mount
	dependsOn     map[string]string // service → condition
	healthcheck   []string          // the test, without CMD / CMD-SHELL
	profiles      []string
}

type build struct{ context, dockerfile, target string }

type portMapping struct{ host, container string }

type mount struct {
	source, target string
	bind           bool
}

// rawCompose is the file as written; decoding rejects keys it does not
// know, so a misspelled key fails the test instead of being ignored.
type rawCompose struct {
	Name     string                 `yaml:"name"`
	Services map[string]*rawService `yaml:"services"`
	Volumes  map[string]any         `yaml:"volumes"`
	Other    map[string]any         `yaml:",inline"`
}

type rawService struct {
	Image           string            `yaml:"image"`
	Build           yaml.Node         `yaml:"build"`
	Command         yaml.Node         `yaml:"command"`
	Hostname        string            `yaml:"hostname"`
	ContainerName   string            `yaml:"container_name"`
	Restart         string            `yaml:"restart"`
	StopGracePeriod string            `yaml:"stop_grace_period"`
	Environment     yaml.Node         `yaml:"environment"`
	Ports           []yaml.Node       `yaml:"ports"`
	Volumes         []yaml.Node       `yaml:"volumes"`
	DependsOn       yaml.Node         `yaml:"depends_on"`
	Healthcheck     *rawHealthcheck   `yaml:"healthcheck"`
	Ulimits         map[string]any    `yaml:"ulimits"`
	Labels          map[string]string `yaml:"labels"`
	Profiles        []string          `yaml:"profiles"`
}

type rawHealthcheck struct {
	Test        yaml.Node `yaml:"test"`
	Interval    string    `yaml:"interval"`
	Timeout     string    `yaml:"timeout"`
	Retries     int       `yaml:"retries"`
	StartPeriod string    `yaml:"start_period"`
	Disable     bool      `yaml:"disable"`
}

// parseCompose reads a compose file.
func parseCompose(b []byte) (*project, error) {
	var raw rawCompose
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("decode compose file: %w", err)
	}
	p := &project{services: map[string]*service{}, volumes: map[string]bool{}}
	for name := range raw.Volumes {
		p.volumes[name] = true
	}
	p.extensions = slices.Sorted(maps.Keys(raw.Other))
	for name, rs := range raw.Services {
		s, err := normalize(rs)
		if err != nil {
			return nil, fmt.Errorf("service %s: %w", name, err)
		}
		p.services[name] = s
	}
	return p, nil
}

// deref returns the node an alias stands for.
func deref(n yaml.Node) yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = *n.Alias
	}
	return n
}

func normalize(rs *rawService) (*service, error) {
	rs.Build, rs.Command, rs.Environment, rs.DependsOn = deref(rs.Build), deref(rs.Command), deref(rs.Environment), deref(rs.DependsOn)
	for i := range rs.Ports {
		rs.Ports[i] = deref(rs.Ports[i])
	}
	for i := range rs.Volumes {
		rs.Volumes[i] = deref(rs.Volumes[i])
	}
	if rs.Healthcheck != nil {
		rs.Healthcheck.Test = deref(rs.Healthcheck.Test)
	}
	s := &service{image: rs.Image, containerName: rs.ContainerName, hostname: rs.Hostname, env: map[string]string{}, dependsOn: map[string]string{}, profiles: rs.Profiles}
	if rs.Build.Kind != 0 {
		b := &build{dockerfile: "Dockerfile"}
		switch rs.Build.Kind {
		case yaml.ScalarNode:
			b.context = rs.Build.Value
		case yaml.MappingNode:
			var m struct {
				Context    string            `yaml:"context"`
				Dockerfile string            `yaml:"dockerfile"`
				Target     string            `yaml:"target"`
				Args       map[string]string `yaml:"args"`
			}
			if err := rs.Build.Decode(&m); err != nil {
				return nil, fmt.Errorf("build: %w", err)
			}
			b.context, b.target = m.Context, m.Target
			if m.Dockerfile != "" {
				b.dockerfile = m.Dockerfile
			}
		default:
			return nil, errors.New("build: neither a path nor a mapping")
		}
		s.build = b
	}
	var err error
	if s.command, err = stringOrList(rs.Command); err != nil {
		return nil, fmt.Errorf("command: %w", err)
	}
	switch rs.Environment.Kind {
	case 0:
	case yaml.MappingNode:
		// Decoding resolves merge keys (<<: *anchor).
		var m map[string]any
		if err := rs.Environment.Decode(&m); err != nil {
			return nil, fmt.Errorf("environment: %w", err)
		}
		for k, v := range m {
			if v != nil {
				s.env[k] = fmt.Sprint(v)
			} else {
				s.env[k] = ""
			}
		}
	case yaml.SequenceNode:
		var l []string
		if err := rs.Environment.Decode(&l); err != nil {
			return nil, fmt.Errorf("environment: %w", err)
		}
		for _, kv := range l {
			k, v, _ := strings.Cut(kv, "=")
			s.env[k] = v
		}
	default:
		return nil, errors.New("environment: neither a mapping nor a list")
	}
	for _, n := range rs.Ports {
		pm, err := parsePort(n)
		if err != nil {
			return nil, err
		}
		s.ports = append(s.ports, pm)
	}
	for _, n := range rs.Volumes {
		m, err := parseMount(n)
		if err != nil {
			return nil, err
		}
		s.volumes = append(s.volumes, m)
	}
	switch rs.DependsOn.Kind {
	case 0:
	case yaml.SequenceNode:
		var l []string
		if err := rs.DependsOn.Decode(&l); err != nil {
			return nil, fmt.Errorf("depends_on: %w", err)
		}
		for _, d := range l {
			s.dependsOn[d] = "service_started"
		}
	case yaml.MappingNode:
		var m map[string]struct {
			Condition string `yaml:"condition"`
			Restart   bool   `yaml:"restart"`
			Required  *bool  `yaml:"required"`
		}
		if err := rs.DependsOn.Decode(&m); err != nil {
			return nil, fmt.Errorf("depends_on: %w", err)
		}
		for d, c := range m {
			s.dependsOn[d] = orDefault(c.Condition, "service_started")
		}
	default:
		return nil, errors.New("depends_on: neither a list nor a mapping")
	}
	if h := rs.Healthcheck; h != nil && !h.Disable {
		test, err := stringOrList(h.Test)
		if err != nil {
			return nil, fmt.Errorf("healthcheck: %w", err)
		}
		switch {
		case len(test) == 0, test[0] == "NONE":
		case test[0] == "CMD", test[0] == "CMD-SHELL":
			s.healthcheck = test[1:]
		case h.Test.Kind == yaml.ScalarNode:
			s.healthcheck = test // a string is a CMD-SHELL command
		default:
			return nil, fmt.Errorf("healthcheck test %q: want CMD, CMD-SHELL or NONE first", test)
		}
	}
	return s, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func stringOrList(n yaml.Node) ([]string, error) {
	switch n.Kind {
	case 0:
		return nil, nil
	case yaml.ScalarNode:
		return []string{n.Value}, nil
	case yaml.SequenceNode:
		var l []string
		err := n.Decode(&l)
		return l, err
	}
	return nil, errors.New("neither a string nor a list")
}

// parsePort reads [[host_ip:]host:]container[/protocol], or the long syntax.
func parsePort(n yaml.Node) (portMapping, error) {
	switch n.Kind {
	case yaml.ScalarNode:
		v, _, _ := strings.Cut(n.Value, "/")
		// The container port follows the last colon; the host part may hold
		// an interpolation with colons of its own (${PORT:-8080}).
		if i := strings.LastIndexByte(v, ':'); i >= 0 {
			host := v[:i]
			// Drop a host IP: what follows its last colon outside ${...}.
			if j := strings.LastIndexByte(host, ':'); j >= 0 && !strings.Contains(host[j:], "}") {
				host = host[j+1:]
			}
			return portMapping{host: host, container: v[i+1:]}, nil
		}
		return portMapping{container: v}, nil
	case yaml.MappingNode:
		var m struct {
			Target    any    `yaml:"target"`
			Published any    `yaml:"published"`
			HostIP    string `yaml:"host_ip"`
			Protocol  string `yaml:"protocol"`
			Mode      string `yaml:"mode"`
		}
		if err := n.Decode(&m); err != nil {
			return portMapping{}, fmt.Errorf("ports: %w", err)
		}
		pm := portMapping{container: fmt.Sprint(m.Target)}
		if m.Published != nil {
			pm.host = fmt.Sprint(m.Published)
		}
		return pm, nil
	}
	return portMapping{}, errors.New("ports: entry neither a string nor a mapping")
}

// parseMount reads source:target[:mode], or the long syntax.
func parseMount(n yaml.Node) (mount, error) {
	isBind := func(src string) bool {
		return strings.HasPrefix(src, ".") || strings.HasPrefix(src, "/") || strings.HasPrefix(src, "~")
	}
	switch n.Kind {
	case yaml.ScalarNode:
		parts := strings.Split(n.Value, ":")
		if len(parts) == 1 {
			return mount{target: parts[0]}, nil // anonymous volume
		}
		return mount{source: parts[0], target: parts[1], bind: isBind(parts[0])}, nil
	case yaml.MappingNode:
		var m struct {
			Type     string `yaml:"type"`
			Source   string `yaml:"source"`
			Target   string `yaml:"target"`
			ReadOnly bool   `yaml:"read_only"`
		}
		if err := n.Decode(&m); err != nil {
			return mount{}, fmt.Errorf("volumes: %w", err)
		}
		return mount{source: m.Source, target: m.Target, bind: m.Type == "bind"}, nil
	}
	return mount{}, errors.New("volumes: entry neither a string nor a mapping")
}

// dockerfile is the part of a Dockerfile the checks read.
type dockerfile struct {
	args   map[string]string // global ARG defaults
	stages map[string]*stage
}

type stage struct {
	from       string
	env        map[string]string
	copies     []copyFrom
	entrypoint []string
	goBuilds   []goBuild
	goInstalls []string // module@version
}

type copyFrom struct{ stage, src string }

type goBuild struct {
	out  string
	pkgs []string
}

// dockerLines returns the instructions of a Dockerfile, continuation lines
// joined and comments dropped.
func dockerLines(b []byte) []string {
	var out []string
	var cur strings.Builder
	for line := range strings.SplitSeq(string(b), "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "#") || (t == "" && cur.Len() == 0) {
			continue
		}
		if s, ok := strings.CutSuffix(t, `\`); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(t)
		if s := strings.TrimSpace(cur.String()); s != "" {
			out = append(out, s)
		}
		cur.Reset()
	}
	return out
}

func parseDockerfile(b []byte) (*dockerfile, error) {
	d := &dockerfile{args: map[string]string{}, stages: map[string]*stage{}}
	var cur *stage
	n := 0
	for _, line := range dockerLines(b) {
		f := strings.Fields(line)
		switch instr := strings.ToUpper(f[0]); {
		case instr == "ARG" && cur == nil:
			for _, a := range f[1:] {
				k, v, _ := strings.Cut(a, "=")
				d.args[k] = v
			}
		case instr == "FROM":
			args := slices.DeleteFunc(f[1:], func(s string) bool { return strings.HasPrefix(s, "--") })
			cur = &stage{from: args[0], env: map[string]string{}}
			name := strconv.Itoa(n)
			if len(args) == 3 && strings.EqualFold(args[1], "AS") {
				name = args[2]
			}
			if _, dup := d.stages[name]; dup {
				return nil, fmt.Errorf("stage %q defined twice", name)
			}
			d.stages[name] = cur
			n++
		case cur == nil:
			continue
		case instr == "ENV":
			for _, a := range f[1:] {
				k, v, ok := strings.Cut(a, "=")
				if !ok {
					return nil, fmt.Errorf("ENV %q: use the KEY=value form", line)
				}
				cur.env[k] = v
			}
		case instr == "COPY":
			var from string
			var rest []string
			for _, a := range f[1:] {
				if v, ok := strings.CutPrefix(a, "--from="); ok {
					from = v
				} else if !strings.HasPrefix(a, "--") {
					rest = append(rest, a)
				}
			}
			if from != "" {
				for _, src := range rest[:len(rest)-1] {
					cur.copies = append(cur.copies, copyFrom{stage: from, src: src})
				}
			}
		case instr == "ENTRYPOINT":
			var ep []string
			if err := json.Unmarshal([]byte(strings.TrimSpace(line[len(f[0]):])), &ep); err != nil {
				return nil, fmt.Errorf("ENTRYPOINT must be an exec-form JSON array: %q: %w", line, err)
			}
			cur.entrypoint = ep
		case instr == "RUN":
			parseGoCommands(cur, f[1:])
		}
	}
	return d, nil
}

// parseGoCommands records the go build and go install commands of a RUN.
func parseGoCommands(st *stage, words []string) {
	for i := 0; i+1 < len(words); i++ {
		if words[i] != "go" || (words[i+1] != "build" && words[i+1] != "install") {
			continue
		}
		install := words[i+1] == "install"
		var gb goBuild
		for j := i + 2; j < len(words); j++ {
			w := words[j]
			if w == "&&" || w == ";" || w == "||" {
				break
			}
			switch {
			case w == "-o" && j+1 < len(words):
				gb.out = words[j+1]
				j++
			case install && strings.Contains(w, "@") && !strings.HasPrefix(w, "-"):
				st.goInstalls = append(st.goInstalls, w)
			case strings.HasPrefix(w, "./"):
				gb.pkgs = append(gb.pkgs, w)
			}
		}
		if !install {
			st.goBuilds = append(st.goBuilds, gb)
		}
	}
}

// codeVars returns the GRIDCRAWL_* variables the code reads: the env tags
// of struct fields in the non-test Go files under services/ and pkg/, each
// with the file that reads it.
func codeVars(fsys fs.FS) (map[string]string, error) {
	vars := map[string]string{}
	var problems []error
	for _, root := range []string{"services", "pkg"} {
		err := fs.WalkDir(fsys, root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return fs.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return nil
			}
			src, err := fs.ReadFile(fsys, p)
			if err != nil {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), p, src, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				field, ok := n.(*ast.Field)
				if !ok || field.Tag == nil {
					return true
				}
				tag, err := strconv.Unquote(field.Tag.Value)
				if err != nil {
					return true
				}
				st := reflect.StructTag(tag)
				if prefix, ok := st.Lookup("envPrefix"); ok {
					// Names under a prefix are not spelled out in any tag.
					problems = append(problems, fmt.Errorf("%s: envPrefix %q: this check does not compose prefixed names; extend codeVars", p, prefix))
				}
				name, _, _ := strings.Cut(st.Get("env"), ",")
				if strings.HasPrefix(name, "GRIDCRAWL_") {
					vars[name] = p
				}
				return true
			})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return vars, errors.Join(problems...)
}

// checker checks a project against the repository in fsys.
type checker struct {
	fsys     fs.FS
	vars     map[string]string
	checked  map[string]bool // Dockerfiles
	problems []string
}

func (c *checker) errorf(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

// check returns every way p disagrees with the code in fsys.
func check(p *project, fsys fs.FS) []string {
	vars, err := codeVars(fsys)
	c := &checker{fsys: fsys, vars: vars, checked: map[string]bool{}}
	if err != nil {
		c.errorf("collect the variables the code reads: %v", err)
	}
	for _, x := range p.extensions {
		if !strings.HasPrefix(x, "x-") {
			c.errorf("top-level key %q: compose knows name, services, volumes, networks, configs, secrets and x-* extensions", x)
		}
	}
	for _, name := range requiredServices {
		if p.services[name] == nil {
			c.errorf("service %s is missing", name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(p.services)) {
		s := p.services[name]
		c.checkImage(name, s)
		c.checkEnv(name, s)
		c.checkDependencies(p, name, s)
		c.checkVolumes(p, name, s)
		for _, probe := range healthProbes[name] {
			if !strings.Contains(strings.Join(s.healthcheck, " "), probe) {
				c.errorf("service %s: its healthcheck %q does not probe %q", name, s.healthcheck, probe)
			}
		}
	}
	for _, name := range goServices {
		if s := p.services[name]; s != nil {
			c.checkBackends(p, name, s)
		}
	}
	for _, name := range scalable {
		s := p.services[name]
		if s == nil {
			continue
		}
		if s.containerName != "" {
			c.errorf("service %s: container_name %q prevents docker compose up --scale %s=N", name, s.containerName, name)
		}
		for _, pm := range s.ports {
			if pm.host != "" {
				c.errorf("service %s: host port %s prevents more than one replica", name, pm.host)
			}
		}
	}
	if s := p.services["mcp"]; s != nil {
		c.checkMCP(s)
	}
	c.checkBackendSettings(p)
	c.checkMonitoring(p)
	c.checkCluster(p)
	c.checkHostPorts(p)
	for v := range p.volumes {
		used := false
		for _, s := range p.services {
			used = used || slices.ContainsFunc(s.volumes, func(m mount) bool { return !m.bind && m.source == v })
		}
		if !used {
			c.errorf("volume %s is declared but no service mounts it", v)
		}
	}
	return c.problems
}

// checkImage checks a service's image or build, and for a build, that its
// Dockerfile target runs a binary the Dockerfile builds from a main package
// of this repository (or installs at the pinned version).
func (c *checker) checkImage(name string, s *service) {
	switch {
	case s.build == nil && s.image == "":
		c.errorf("service %s has neither image nor build", name)
		return
	case s.build == nil:
		if slices.Contains(goServices, name) {
			c.errorf("service %s: a gridcrawl service must be built from deploy/Dockerfile, not image %q", name, s.image)
		}
		return
	}
	b := s.build
	ctx := path.Clean(b.context)
	if fi, err := fs.Stat(c.fsys, ctx); err != nil || !fi.IsDir() {
		c.errorf("service %s: build context %q is not a directory of the repository", name, b.context)
		return
	}
	dfPath := path.Join(ctx, b.dockerfile)
	src, err := fs.ReadFile(c.fsys, dfPath)
	if err != nil {
		c.errorf("service %s: dockerfile %q: %v", name, dfPath, err)
		return
	}
	df, err := parseDockerfile(src)
	if err != nil {
		c.errorf("%s: %v", dfPath, err)
		return
	}
	c.checkDockerfile(dfPath, ctx, df)
	if b.target == "" {
		c.errorf("service %s: build of %s names no target; it would build the last stage", name, dfPath)
		return
	}
	st := df.stages[b.target]
	if st == nil {
		c.errorf("service %s: %s has no stage %q", name, dfPath, b.target)
		return
	}
	if len(st.entrypoint) == 0 {
		c.errorf("service %s: stage %q of %s has no ENTRYPOINT", name, b.target, dfPath)
		return
	}
	bin := path.Base(st.entrypoint[0])
	i := slices.IndexFunc(st.copies, func(cp copyFrom) bool { return path.Base(cp.src) == bin })
	if i < 0 {
		c.errorf("service %s: stage %q runs %s but copies no such binary from a build stage", name, b.target, st.entrypoint[0])
		return
	}
	from := df.stages[st.copies[i].stage]
	if from == nil {
		c.errorf("service %s: stage %q copies %s from unknown stage %q", name, b.target, bin, st.copies[i].stage)
		return
	}
	var built string // where the binary comes from
	for _, gb := range from.goBuilds {
		for _, pkg := range gb.pkgs {
			if path.Base(pkg) == bin && path.Dir(st.copies[i].src) == path.Clean(gb.out) {
				built = path.Clean(pkg)
			}
		}
	}
	for _, mv := range from.goInstalls {
		mod, _, _ := strings.Cut(mv, "@")
		if path.Base(mod) == bin {
			built = mv
		}
	}
	switch {
	case built == "":
		c.errorf("service %s: stage %q runs %s, which stage %q neither builds nor installs", name, b.target, bin, st.copies[i].stage)
	case slices.Contains(goServices, name) && built != "services/"+name:
		c.errorf("service %s: runs the binary of %s, want services/%s", name, built, name)
	}
}

// checkDockerfile checks what a Dockerfile builds, once per file.
func (c *checker) checkDockerfile(dfPath, ctx string, df *dockerfile) {
	if c.checked[dfPath] {
		return
	}
	c.checked[dfPath] = true
	var built []string
	for sn, st := range df.stages {
		for k := range st.env {
			if strings.HasPrefix(k, "GRIDCRAWL_") && c.vars[k] == "" {
				c.errorf("%s: stage %s sets %s, which no code reads", dfPath, sn, k)
			}
		}
		for _, gb := range st.goBuilds {
			if len(gb.pkgs) == 0 {
				c.errorf("%s: stage %s: go build names no ./package", dfPath, sn)
			}
			for _, pkg := range gb.pkgs {
				dir := path.Join(ctx, pkg)
				if !c.isMainPackage(dir) {
					c.errorf("%s: go build %s: %s is not a directory with package main", dfPath, pkg, dir)
				}
				built = append(built, path.Clean(dir))
			}
		}
		for _, mv := range st.goInstalls {
			c.checkPinned(dfPath, mv)
		}
	}
	// Every gridcrawl binary is built.
	entries, _ := fs.ReadDir(c.fsys, path.Join(ctx, "services"))
	for _, e := range entries {
		dir := path.Join(ctx, "services", e.Name())
		if e.IsDir() && c.isMainPackage(dir) && !slices.Contains(built, dir) {
			c.errorf("%s does not build the main package %s", dfPath, dir)
		}
	}
	if v, ok := df.args["GO_VERSION"]; ok {
		gomod, err := fs.ReadFile(c.fsys, path.Join(ctx, "go.mod"))
		m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(gomod)
		switch {
		case err != nil || m == nil:
			c.errorf("read the go directive of go.mod: %v", err)
		case v != string(m[1]):
			c.errorf("%s: ARG GO_VERSION=%s, but go.mod wants go %s", dfPath, v, m[1])
		}
	}
}

// checkPinned checks that a go install of MinIO uses the version the local
// scripts pin, so production runs what the tests ran against.
func (c *checker) checkPinned(dfPath, mv string) {
	mod, version, _ := strings.Cut(mv, "@")
	if mod != "github.com/minio/minio" {
		return
	}
	script, err := fs.ReadFile(c.fsys, "scripts/services/minio.sh")
	if err != nil {
		c.errorf("read the MinIO version pinned by scripts/services/minio.sh: %v", err)
		return
	}
	pinned := "nothing"
	if m := regexp.MustCompile(`(?m)^MINIO_VERSION=(\S+)`).FindSubmatch(script); m != nil {
		pinned = string(m[1])
	}
	if pinned != version {
		c.errorf("%s installs minio@%s, scripts/services/minio.sh pins %s", dfPath, version, pinned)
	}
}

// isMainPackage reports whether dir holds non-test Go files of package main.
func (c *checker) isMainPackage(dir string) bool {
	entries, err := fs.ReadDir(c.fsys, dir)
	if err != nil {
		return false
	}
	found := false
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		src, err := fs.ReadFile(c.fsys, path.Join(dir, e.Name()))
		if err != nil {
			return false
		}
		f, err := parser.ParseFile(token.NewFileSet(), e.Name(), src, parser.PackageClauseOnly)
		if err != nil || f.Name.Name != "main" {
			return false
		}
		found = true
	}
	return found
}

// checkEnv checks the variables a service sets.
func (c *checker) checkEnv(name string, s *service) {
	gridcrawl := slices.Contains(goServices, name)
	for _, k := range slices.Sorted(maps.Keys(s.env)) {
		switch {
		case strings.HasPrefix(k, "GRIDCRAWL_"):
			if c.vars[k] == "" {
				c.errorf("service %s sets %s, which no code under services/ or pkg/ reads", name, k)
			}
		case gridcrawl:
			c.errorf("service %s sets %s: gridcrawl services read only GRIDCRAWL_* variables", name, k)
		}
	}
	if gridcrawl {
		for _, k := range backendVars {
			if _, ok := s.env[k]; !ok {
				c.errorf("service %s does not set %s: it would fall back to an embedded backend in its own container", name, k)
			}
		}
	}
}

func (c *checker) checkDependencies(p *project, name string, s *service) {
	for _, d := range slices.Sorted(maps.Keys(s.dependsOn)) {
		t := p.services[d]
		switch {
		case t == nil:
			c.errorf("service %s depends on %s, which is not a service", name, d)
		case s.dependsOn[d] != "service_healthy":
			c.errorf("service %s depends on %s with condition %s, want service_healthy", name, d, s.dependsOn[d])
		case len(t.healthcheck) == 0:
			c.errorf("service %s waits for %s to be healthy, but %s has no healthcheck", name, d, d)
		}
	}
}

func (c *checker) checkVolumes(p *project, name string, s *service) {
	for _, m := range s.volumes {
		switch {
		case m.source == "":
			c.errorf("service %s: anonymous volume at %s does not survive docker compose down; name it", name, m.target)
		case m.bind:
			src := path.Clean(m.source)
			if strings.HasPrefix(src, "/") || strings.HasPrefix(src, "~") || strings.HasPrefix(src, "..") {
				c.errorf("service %s: bind mount %s is outside the repository", name, m.source)
			} else if _, err := fs.Stat(c.fsys, src); err != nil {
				c.errorf("service %s: bind mount source %s: %v", name, m.source, err)
			}
		case !p.volumes[m.source]:
			c.errorf("service %s mounts volume %s, which is not declared under volumes", name, m.source)
		}
	}
}

// hostPort splits the host and port of an address, URL or host:port.
func hostPort(s string) (host, port string) {
	if _, rest, ok := strings.Cut(s, "://"); ok {
		s = rest
	}
	if i := strings.LastIndexByte(s, '@'); i >= 0 {
		s = s[i+1:]
	}
	s, _, _ = strings.Cut(s, "/")
	host, port, _ = strings.Cut(s, ":")
	return host, port
}

// checkBackends checks that a gridcrawl service's backend addresses name
// services of the file on their usual ports, and that it waits for them.
func (c *checker) checkBackends(p *project, name string, s *service) {
	for _, tc := range []struct{ v, port string }{
		{"GRIDCRAWL_AMQP_URL", "5672"},
		{"GRIDCRAWL_ES_URL", "9200"},
		{"GRIDCRAWL_S3_ENDPOINT", "9000"},
	} {
		v, ok := s.env[tc.v]
		if !ok {
			continue // reported by checkEnv
		}
		host, port := hostPort(v)
		switch {
		case p.services[host] == nil:
			c.errorf("service %s: %s=%s names host %q, which is not a service", name, tc.v, v, host)
		case port != tc.port:
			c.errorf("service %s: %s=%s: port %q, want %s", name, tc.v, v, port, tc.port)
		case s.dependsOn[host] == "":
			c.errorf("service %s uses %s (%s) but does not depend on it", name, host, tc.v)
		}
	}
}

// checkBackendSettings checks the backends' own settings, and that the
// credentials the gridcrawl services use are the ones the backends start
// with.
func (c *checker) checkBackendSettings(p *project) {
	if es := p.services["elasticsearch"]; es != nil {
		for k, want := range map[string]string{"discovery.type": "single-node", "xpack.security.enabled": "false"} {
			if es.env[k] != want {
				c.errorf("service elasticsearch: %s=%q, want %q", k, es.env[k], want)
			}
		}
		if o := es.env["ES_JAVA_OPTS"]; !strings.Contains(o, "-Xms") || !strings.Contains(o, "-Xmx") {
			c.errorf("service elasticsearch: ES_JAVA_OPTS=%q sets no heap (-Xms, -Xmx)", o)
		}
	}
	if m := p.services["minio"]; m != nil && (!slices.Contains(m.command, "server") || !slices.Contains(m.command, "/data")) {
		c.errorf("service minio: command %q, want server /data", m.command)
	}
	rabbit, minio := p.services["rabbitmq"], p.services["minio"]
	for _, name := range goServices {
		s := p.services[name]
		if s == nil {
			continue
		}
		if u, ok := s.env["GRIDCRAWL_AMQP_URL"]; ok && rabbit != nil {
			creds := rabbit.env["RABBITMQ_DEFAULT_USER"] + ":" + rabbit.env["RABBITMQ_DEFAULT_PASS"] + "@"
			if !strings.Contains(u, "://"+creds) {
				c.errorf("service %s: GRIDCRAWL_AMQP_URL=%q does not use the credentials rabbitmq starts with (RABBITMQ_DEFAULT_USER, RABBITMQ_DEFAULT_PASS)", name, u)
			}
		}
		if minio == nil {
			continue
		}
		for k, mk := range map[string]string{"GRIDCRAWL_S3_ACCESS_KEY": "MINIO_ROOT_USER", "GRIDCRAWL_S3_SECRET_KEY": "MINIO_ROOT_PASSWORD"} {
			if v, ok := s.env[k]; ok && v != minio.env[mk] {
				c.errorf("service %s: %s=%q differs from minio's %s=%q", name, k, v, mk, minio.env[mk])
			}
		}
	}
}

// checkMCP checks the API's address, published ports and token.
func (c *checker) checkMCP(s *service) {
	listen, ok := s.env["GRIDCRAWL_LISTEN"]
	if !ok {
		c.errorf("service mcp does not set GRIDCRAWL_LISTEN; its default listens on the container's loopback only")
		return
	}
	i := strings.LastIndexByte(listen, ':')
	if i < 0 {
		c.errorf("service mcp: GRIDCRAWL_LISTEN=%q is not host:port", listen)
		return
	}
	host, port := listen[:i], listen[i+1:]
	if host != "" && host != "0.0.0.0" && host != "[::]" {
		c.errorf("service mcp: GRIDCRAWL_LISTEN=%q: listen on 0.0.0.0, not on the container's %s", listen, host)
	}
	if len(s.ports) == 0 {
		c.errorf("service mcp publishes no port")
	}
	for _, pm := range s.ports {
		if pm.container != port {
			c.errorf("service mcp maps container port %s, but GRIDCRAWL_LISTEN=%s listens on %s", pm.container, listen, port)
		}
	}
	if hc := strings.Join(s.healthcheck, " "); !strings.Contains(hc, ":"+port+"/healthz") {
		c.errorf("service mcp: healthcheck %q does not probe port %s", hc, port)
	}
	if tok := s.env["GRIDCRAWL_API_TOKEN"]; !strings.HasPrefix(tok, "${GRIDCRAWL_API_TOKEN:?") {
		c.errorf("service mcp: GRIDCRAWL_API_TOKEN=%q, want ${GRIDCRAWL_API_TOKEN:?...} so that a missing token stops docker compose", tok)
	}
}

// monitoringProfile is the compose profile that starts Prometheus and
// Grafana; monitoringServices are its services.
const monitoringProfile = "monitoring"

var monitoringServices = []string{"prometheus", "grafana"}

// checkMonitoring checks the monitoring profile: the grid's services are in
// no profile, Prometheus and Grafana only in it; every gridcrawl service
// serves its metrics on the compose network and Prometheus scrapes it
// there; Grafana is provisioned with that Prometheus and with dashboards
// that exist and parse.
func (c *checker) checkMonitoring(p *project) {
	for _, name := range requiredServices {
		if s := p.services[name]; s != nil && len(s.profiles) > 0 {
			c.errorf("service %s is in profiles %q: docker compose up would not start it", name, s.profiles)
		}
	}
	for _, name := range monitoringServices {
		s := p.services[name]
		switch {
		case s == nil:
			c.errorf("service %s (profile %s) is missing", name, monitoringProfile)
		case !slices.Contains(s.profiles, monitoringProfile):
			c.errorf("service %s is in profiles %q, want %q: monitoring is optional", name, s.profiles, monitoringProfile)
		}
	}
	prom, graf := p.services["prometheus"], p.services["grafana"]
	if prom == nil || graf == nil {
		return
	}
	targets := c.scrapeTargets(prom)
	for _, name := range goServices {
		s := p.services[name]
		if s == nil {
			continue
		}
		listen, ok := s.env["GRIDCRAWL_METRICS_LISTEN"]
		if !ok {
			c.errorf("service %s does not set GRIDCRAWL_METRICS_LISTEN: Prometheus cannot scrape it", name)
			continue
		}
		i := strings.LastIndexByte(listen, ':')
		if i < 0 || (listen[:i] != "0.0.0.0" && listen[:i] != "" && listen[:i] != "[::]") {
			c.errorf("service %s: GRIDCRAWL_METRICS_LISTEN=%q: listen on 0.0.0.0:PORT for the compose network", name, listen)
			continue
		}
		if want := name + ":" + listen[i+1:]; !targets[want] {
			c.errorf("service %s serves metrics on %s but Prometheus does not scrape %s (it scrapes %v)", name, listen, want, slices.Sorted(maps.Keys(targets)))
		}
		for _, pm := range s.ports {
			if pm.container == listen[i+1:] {
				c.errorf("service %s publishes its metrics port %s: /metrics needs no token there, keep it on the compose network", name, pm.container)
			}
		}
	}
	c.checkGrafana(graf)
}

// clusterProfile is the compose profile of the clusters (docs/clusters.md):
// three RabbitMQ nodes, three Elasticsearch nodes, four MinIO servers, and
// the grid on them.
const clusterProfile = "cluster"

var (
	// clusterNodes are the node services of each backend in the profile.
	clusterNodes = map[string][]string{
		"rabbitmq":      {"rabbit1", "rabbit2", "rabbit3"},
		"elasticsearch": {"es1", "es2", "es3"},
		"minio":         {"minio1", "minio2", "minio3", "minio4"},
	}
	// clusterGrid maps the profile's gridcrawl services to the default
	// services they are variants of.
	clusterGrid = map[string]string{"mcp-cluster": "mcp", "loader-cluster": "loader", "crawler-cluster": "crawler"}
	// clusterEndpoints are the variables that list a backend's nodes, and
	// the port every node serves on the compose network.
	clusterEndpoints = []struct{ v, backend, port string }{
		{"GRIDCRAWL_AMQP_URL", "rabbitmq", "5672"},
		{"GRIDCRAWL_ES_URL", "elasticsearch", "9200"},
		{"GRIDCRAWL_S3_ENDPOINT", "minio", "9000"},
	}
)

// checkCluster checks the cluster profile: its services exist and start
// only with the profile; the RabbitMQ nodes share a cookie and find each
// other; the Elasticsearch nodes form one cluster; every MinIO server
// lists every drive; the grid's variants are the default services' binaries
// given every node of every backend, and wait for all of them.
func (c *checker) checkCluster(p *project) {
	var names []string
	for _, backend := range slices.Sorted(maps.Keys(clusterNodes)) {
		names = append(names, clusterNodes[backend]...)
	}
	names = append(names, slices.Sorted(maps.Keys(clusterGrid))...)
	for _, name := range names {
		s := p.services[name]
		switch {
		case s == nil:
			c.errorf("service %s (profile %s) is missing", name, clusterProfile)
		case !slices.Equal(s.profiles, []string{clusterProfile}):
			c.errorf("service %s is in profiles %q, want only %q: the clusters are optional", name, s.profiles, clusterProfile)
		}
	}
	for backend, nodes := range clusterNodes {
		for _, name := range nodes {
			s := p.services[name]
			if s == nil {
				continue
			}
			for _, probe := range healthProbes[backend] {
				if !strings.Contains(strings.Join(s.healthcheck, " "), probe) {
					c.errorf("service %s: its healthcheck %q does not probe %q", name, s.healthcheck, probe)
				}
			}
		}
	}
	c.checkRabbitCluster(p)
	c.checkESCluster(p)
	c.checkMinIOCluster(p)
	for _, name := range slices.Sorted(maps.Keys(clusterGrid)) {
		if s := p.services[name]; s != nil {
			c.checkClusterGrid(p, name, s)
		}
	}
}

func (c *checker) checkRabbitCluster(p *project) {
	var peers []string
	cookie := ""
	for _, name := range clusterNodes["rabbitmq"] {
		s := p.services[name]
		if s == nil {
			continue
		}
		if s.hostname != name {
			c.errorf("service %s: hostname %q, want %q: the node name rabbit@HOSTNAME is what its peers look for", name, s.hostname, name)
		}
		peers = append(peers, "rabbit@"+s.hostname)
		args := s.env["RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS"]
		if !strings.Contains(args, "-setcookie ") {
			c.errorf("service %s: RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=%q sets no -setcookie: the nodes would not share an Erlang cookie", name, args)
		}
		if ctl := s.env["RABBITMQ_CTL_ERL_ARGS"]; ctl != args {
			c.errorf("service %s: RABBITMQ_CTL_ERL_ARGS=%q differs from the server's %q: its CLI tools (the health check) could not reach the node", name, ctl, args)
		}
		if cookie == "" {
			cookie = args
		} else if args != cookie {
			c.errorf("service %s: Erlang arguments %q differ from %s's %q: the nodes would not share a cookie", name, args, clusterNodes["rabbitmq"][0], cookie)
		}
	}
	for _, name := range clusterNodes["rabbitmq"] {
		s := p.services[name]
		if s == nil {
			continue
		}
		conf := ""
		for _, m := range s.volumes {
			if m.bind && strings.HasPrefix(m.target, "/etc/rabbitmq/conf.d/") && strings.Contains(m.source, "cluster") {
				conf = path.Clean(m.source)
			}
		}
		if conf == "" {
			c.errorf("service %s mounts no cluster configuration into /etc/rabbitmq/conf.d/: it would not join the others", name)
			continue
		}
		b, err := fs.ReadFile(c.fsys, conf)
		if err != nil {
			c.errorf("service %s: %v", name, err)
			continue
		}
		var listed []string
		backend, locator := "", ""
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(line, "=")
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			switch {
			case !ok || strings.HasPrefix(k, "#"):
			case k == "cluster_formation.peer_discovery_backend":
				backend = v
			case strings.HasPrefix(k, "cluster_formation.classic_config.nodes."):
				listed = append(listed, v)
			case k == "queue_leader_locator":
				locator = v
			}
		}
		if locator != "balanced" {
			c.errorf("%s: queue_leader_locator=%q, want balanced: with client-local the node every service connects to first leads every queue", conf, locator)
		}
		if backend != "classic_config" && backend != "rabbit_peer_discovery_classic_config" {
			c.errorf("%s: cluster_formation.peer_discovery_backend=%q, want classic_config", conf, backend)
		}
		if !sameSet(listed, peers) {
			c.errorf("%s lists the peers %q, want every node %q", conf, listed, peers)
		}
	}
}

func (c *checker) checkESCluster(p *project) {
	nodes := clusterNodes["elasticsearch"]
	clusterName := ""
	for _, name := range nodes {
		s := p.services[name]
		if s == nil {
			continue
		}
		if s.env["node.name"] != name {
			c.errorf("service %s: node.name=%q, want %q", name, s.env["node.name"], name)
		}
		if v, ok := s.env["discovery.type"]; ok {
			c.errorf("service %s: discovery.type=%q makes it a cluster of its own", name, v)
		}
		for _, k := range []string{"discovery.seed_hosts", "cluster.initial_master_nodes"} {
			if l := splitList(s.env[k]); !sameSet(l, nodes) {
				c.errorf("service %s: %s=%q, want every node %q", name, k, s.env[k], nodes)
			}
		}
		if s.env["xpack.security.enabled"] != "false" {
			c.errorf("service %s: xpack.security.enabled=%q, want \"false\" (gridcrawl speaks plain HTTP to it)", name, s.env["xpack.security.enabled"])
		}
		if o := s.env["ES_JAVA_OPTS"]; !strings.Contains(o, "-Xms") || !strings.Contains(o, "-Xmx") {
			c.errorf("service %s: ES_JAVA_OPTS=%q sets no heap (-Xms, -Xmx)", name, o)
		}
		cn := s.env["cluster.name"]
		switch {
		case cn == "":
			c.errorf("service %s sets no cluster.name", name)
		case clusterName == "":
			clusterName = cn
		case cn != clusterName:
			c.errorf("service %s: cluster.name=%q, the other nodes %q", name, cn, clusterName)
		}
	}
}

// minioEllipsis matches MinIO's {N...M} expansion.
var minioEllipsis = regexp.MustCompile(`\{(\d+)\.\.\.(\d+)\}`)

// expandMinIO expands the {N...M} ranges of a MinIO server argument.
func expandMinIO(arg string) []string {
	m := minioEllipsis.FindStringSubmatchIndex(arg)
	if m == nil {
		return []string{arg}
	}
	lo, _ := strconv.Atoi(arg[m[2]:m[3]])
	hi, _ := strconv.Atoi(arg[m[4]:m[5]])
	var out []string
	for i := lo; i <= hi && hi-lo < 1000; i++ {
		for _, rest := range expandMinIO(arg[m[1]:]) {
			out = append(out, arg[:m[0]]+strconv.Itoa(i)+rest)
		}
	}
	return out
}

func (c *checker) checkMinIOCluster(p *project) {
	nodes := clusterNodes["minio"]
	var user, password string
	for i, name := range nodes {
		s := p.services[name]
		if s == nil {
			continue
		}
		if s.hostname != name {
			c.errorf("service %s: hostname %q, want %q: the servers reach each other by the names in their drive list", name, s.hostname, name)
		}
		var drives []string
		for _, arg := range s.command {
			if strings.Contains(arg, "://") {
				drives = append(drives, expandMinIO(arg)...)
			}
		}
		var want []string
		for _, n := range nodes {
			want = append(want, "http://"+n+":9000/data")
		}
		if !slices.Contains(s.command, "server") || !sameSet(drives, want) {
			c.errorf("service %s: command %q, want server with every drive %q", name, s.command, want)
		}
		if mountSourceVolume(s, "/data") == "" {
			c.errorf("service %s: no named volume at /data: its drive would not survive docker compose down", name)
		}
		if i == 0 {
			user, password = s.env["MINIO_ROOT_USER"], s.env["MINIO_ROOT_PASSWORD"]
		} else if s.env["MINIO_ROOT_USER"] != user || s.env["MINIO_ROOT_PASSWORD"] != password {
			c.errorf("service %s: credentials differ from %s's", name, nodes[0])
		}
	}
}

// mountSourceVolume returns the named volume mounted at target, or "".
func mountSourceVolume(s *service, target string) string {
	for _, m := range s.volumes {
		if !m.bind && path.Clean(m.target) == target {
			return m.source
		}
	}
	return ""
}

// checkClusterGrid checks one gridcrawl service of the cluster profile.
func (c *checker) checkClusterGrid(p *project, name string, s *service) {
	base := p.services[clusterGrid[name]]
	if base != nil && (s.build == nil || base.build == nil || *s.build != *base.build) {
		c.errorf("service %s is not built like %s: it must run the same binary", name, clusterGrid[name])
	}
	for _, k := range backendVars {
		if _, ok := s.env[k]; !ok {
			c.errorf("service %s does not set %s: it would fall back to an embedded backend in its own container", name, k)
		}
	}
	for _, ep := range clusterEndpoints {
		v, ok := s.env[ep.v]
		if !ok {
			continue
		}
		var hosts []string
		for _, e := range splitList(v) {
			host, port := hostPort(e)
			if port != ep.port {
				c.errorf("service %s: %s names %s with port %q, want %s", name, ep.v, e, port, ep.port)
			}
			hosts = append(hosts, host)
		}
		if !sameSet(hosts, clusterNodes[ep.backend]) {
			c.errorf("service %s: %s=%q names %q, want every %s node %q once", name, ep.v, v, hosts, ep.backend, clusterNodes[ep.backend])
		}
		for _, n := range clusterNodes[ep.backend] {
			if s.dependsOn[n] == "" {
				c.errorf("service %s uses %s (%s) but does not depend on it", name, n, ep.v)
			}
		}
	}
	if rabbit := p.services[clusterNodes["rabbitmq"][0]]; rabbit != nil {
		creds := rabbit.env["RABBITMQ_DEFAULT_USER"] + ":" + rabbit.env["RABBITMQ_DEFAULT_PASS"] + "@"
		for _, u := range splitList(s.env["GRIDCRAWL_AMQP_URL"]) {
			if !strings.Contains(u, "://"+creds) {
				c.errorf("service %s: GRIDCRAWL_AMQP_URL entry %q does not use the credentials the RabbitMQ nodes start with", name, u)
			}
		}
	}
	if minio := p.services[clusterNodes["minio"][0]]; minio != nil {
		for k, mk := range map[string]string{"GRIDCRAWL_S3_ACCESS_KEY": "MINIO_ROOT_USER", "GRIDCRAWL_S3_SECRET_KEY": "MINIO_ROOT_PASSWORD"} {
			if v, ok := s.env[k]; ok && v != minio.env[mk] {
				c.errorf("service %s: %s=%q differs from the MinIO servers' %s=%q", name, k, v, mk, minio.env[mk])
			}
		}
	}
	switch clusterGrid[name] {
	case "mcp":
		c.checkMCP(s)
	default:
		if s.containerName != "" {
			c.errorf("service %s: container_name %q prevents docker compose up --scale %s=N", name, s.containerName, name)
		}
		for _, pm := range s.ports {
			if pm.host != "" {
				c.errorf("service %s: host port %s prevents more than one replica", name, pm.host)
			}
		}
	}
}

// checkHostPorts checks that no two services publish the same host port:
// the default services, the monitoring and the cluster profiles run side
// by side.
func (c *checker) checkHostPorts(p *project) {
	owner := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(p.services)) {
		for _, pm := range p.services[name].ports {
			if pm.host == "" {
				continue
			}
			port := pm.host
			// ${VAR:-default}: the port used when VAR is unset.
			if _, def, ok := strings.Cut(port, ":-"); ok {
				port = strings.TrimSuffix(def, "}")
			}
			if o := owner[port]; o != "" {
				c.errorf("services %s and %s both publish host port %s", o, name, port)
			}
			owner[port] = name
		}
	}
}

// splitList splits a comma-separated list, trimming spaces.
func splitList(v string) []string {
	var out []string
	for _, e := range strings.Split(v, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// sameSet reports whether a and b hold the same elements, each once.
func sameSet(a, b []string) bool {
	as, bs := slices.Clone(a), slices.Clone(b)
	slices.Sort(as)
	slices.Sort(bs)
	return slices.Equal(as, bs) && len(slices.Compact(as)) == len(a)
}

// mountSource returns the repository path bind-mounted at target, or "".
func mountSource(s *service, target string) string {
	for _, m := range s.volumes {
		if m.bind && path.Clean(m.target) == target {
			return path.Clean(m.source)
		}
	}
	return ""
}

// scrapeTargets reads the Prometheus configuration the prometheus service
// mounts and returns its targets as host:port (static ones, and the names
// of DNS service discovery with their port).
func (c *checker) scrapeTargets(s *service) map[string]bool {
	const configPath = "/etc/prometheus/prometheus.yml"
	targets := map[string]bool{}
	if !slices.Contains(s.command, "--config.file="+configPath) && len(s.command) > 0 {
		c.errorf("service prometheus: command %q does not read %s", s.command, configPath)
	}
	src := mountSource(s, configPath)
	if src == "" {
		c.errorf("service prometheus mounts no file of the repository at %s", configPath)
		return targets
	}
	b, err := fs.ReadFile(c.fsys, src)
	if err != nil {
		c.errorf("service prometheus: %v", err)
		return targets
	}
	var cfg struct {
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
			DNSSDConfigs []struct {
				Names []string `yaml:"names"`
				Type  string   `yaml:"type"`
				Port  int      `yaml:"port"`
			} `yaml:"dns_sd_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		c.errorf("%s: %v", src, err)
		return targets
	}
	for _, sc := range cfg.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			for _, t := range st.Targets {
				targets[t] = true
			}
		}
		for _, d := range sc.DNSSDConfigs {
			for _, n := range d.Names {
				targets[n+":"+strconv.Itoa(d.Port)] = true
			}
		}
	}
	return targets
}

// checkGrafana checks Grafana's provisioning: a Prometheus data source at
// the prometheus service, and a dashboard provider whose path is mounted
// from a directory of dashboards that parse and ask for gridcrawl metrics.
func (c *checker) checkGrafana(s *service) {
	const provisioning = "/etc/grafana/provisioning"
	dir := mountSource(s, provisioning)
	if dir == "" {
		c.errorf("service grafana mounts no directory of the repository at %s", provisioning)
		return
	}
	var ds struct {
		Datasources []struct {
			Type string `yaml:"type"`
			URL  string `yaml:"url"`
		} `yaml:"datasources"`
	}
	if err := readYAML(c.fsys, path.Join(dir, "datasources/prometheus.yml"), &ds); err != nil {
		c.errorf("grafana data source: %v", err)
	} else if !slices.ContainsFunc(ds.Datasources, func(d struct {
		Type string `yaml:"type"`
		URL  string `yaml:"url"`
	}) bool {
		return d.Type == "prometheus" && d.URL == "http://prometheus:9090"
	}) {
		c.errorf("grafana data sources %+v: none is the prometheus service (http://prometheus:9090)", ds.Datasources)
	}
	var dp struct {
		Providers []struct {
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	if err := readYAML(c.fsys, path.Join(dir, "dashboards/gridcrawl.yml"), &dp); err != nil {
		c.errorf("grafana dashboard provider: %v", err)
		return
	}
	if len(dp.Providers) == 0 {
		c.errorf("grafana dashboard provider lists no provider")
	}
	for _, pr := range dp.Providers {
		src := mountSource(s, path.Clean(pr.Options.Path))
		if src == "" {
			c.errorf("grafana dashboard provider reads %s, which service grafana does not mount from the repository", pr.Options.Path)
			continue
		}
		files, _ := fs.Glob(c.fsys, path.Join(src, "*.json"))
		if len(files) == 0 {
			c.errorf("grafana dashboards: %s holds no *.json", src)
		}
		for _, f := range files {
			b, err := fs.ReadFile(c.fsys, f)
			if err != nil {
				c.errorf("%s: %v", f, err)
				continue
			}
			var d struct {
				UID    string `json:"uid"`
				Panels []struct {
					Targets []struct {
						Expr string `json:"expr"`
					} `json:"targets"`
				} `json:"panels"`
			}
			if err := json.Unmarshal(b, &d); err != nil {
				c.errorf("%s: %v", f, err)
				continue
			}
			exprs := 0
			for _, p := range d.Panels {
				for _, t := range p.Targets {
					if strings.Contains(t.Expr, "gridcrawl_") {
						exprs++
					}
				}
			}
			if d.UID == "" || exprs == 0 {
				c.errorf("%s: uid %q and %d gridcrawl expressions; want a uid and panels over gridcrawl metrics", f, d.UID, exprs)
			}
		}
	}
}

func readYAML(fsys fs.FS, name string, v any) error {
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// repoFS returns the repository root, the parent of this package.
func repoFS() fs.FS { return os.DirFS("..") }

func loadProject(t *testing.T, fsys fs.FS) *project {
	t.Helper()
	b, err := fs.ReadFile(fsys, composePath)
	if err != nil {
		t.Fatalf("read %s: %v", composePath, err)
	}
	p, err := parseCompose(b)
	if err != nil {
		t.Fatalf("parse %s: %v", composePath, err)
	}
	return p
}

// TestCompose checks docker-compose.yml and deploy/Dockerfile against the
// code.
func TestCompose(t *testing.T) {
	fsys := repoFS()
	p := loadProject(t, fsys)
	for _, problem := range check(p, fsys) {
		t.Error(problem)
	}
}

// interpolated matches ${NAME...} and $NAME, but not the escaped $$.
var interpolated = regexp.MustCompile(`(?:^|[^$])\$\{?([A-Za-z_][A-Za-z0-9_]*)`)

// TestComposeInterpolation checks the host variables the compose file
// reads: a GRIDCRAWL_* one must be a variable of the code (the same name
// on the host and in the container), and secrets must be required.
func TestComposeInterpolation(t *testing.T) {
	b, err := fs.ReadFile(repoFS(), composePath)
	if err != nil {
		t.Fatalf("read %s: %v", composePath, err)
	}
	vars, err := codeVars(repoFS())
	if err != nil {
		t.Fatalf("codeVars: %v", err)
	}
	seen := map[string]bool{}
	for _, m := range interpolated.FindAllSubmatch(b, -1) {
		name := string(m[1])
		seen[name] = true
		if strings.HasPrefix(name, "GRIDCRAWL_") && vars[name] == "" {
			t.Errorf("%s reads the host variable %s, a GRIDCRAWL_ name no code reads", composePath, name)
		}
	}
	for _, secret := range []string{"GRIDCRAWL_API_TOKEN", "RABBITMQ_PASSWORD", "MINIO_ROOT_PASSWORD"} {
		if !seen[secret] {
			t.Errorf("%s does not read the secret %s from the host", composePath, secret)
		}
		if re := regexp.MustCompile(`\$\{` + secret + `(:-|-)`); re.Match(b) {
			t.Errorf("%s gives the secret %s a default; require it with ${%s:?message}", composePath, secret, secret)
		}
	}
}

// overlay is fsys with some files replaced.
type overlay struct {
	fs.FS
	files fstest.MapFS
}

func (o overlay) Open(name string) (fs.File, error) {
	if _, ok := o.files[name]; ok {
		return o.files.Open(name)
	}
	return o.FS.Open(name)
}

// TestCheckFindsMistakes makes one mistake at a time and expects check to
// report it: the checks of TestCompose can fail.
func TestCheckFindsMistakes(t *testing.T) {
	dockerfile, err := fs.ReadFile(repoFS(), "deploy/Dockerfile")
	if err != nil {
		t.Fatalf("read deploy/Dockerfile: %v", err)
	}
	editDockerfile := func(old, new string) fs.FS {
		if !bytes.Contains(dockerfile, []byte(old)) {
			t.Fatalf("deploy/Dockerfile does not contain %q to replace", old)
		}
		b := bytes.Replace(dockerfile, []byte(old), []byte(new), 1)
		return overlay{repoFS(), fstest.MapFS{"deploy/Dockerfile": {Data: b, ModTime: time.Now()}}}
	}
	tests := []struct {
		name   string
		edit   func(p *project)
		fsys   func() fs.FS
		report string // a problem must mention this
	}{
		{name: "metrics not served", report: "GRIDCRAWL_METRICS_LISTEN",
			edit: func(p *project) { delete(p.services["crawler"].env, "GRIDCRAWL_METRICS_LISTEN") }},
		{name: "metrics port not scraped", report: "does not scrape loader:9999",
			edit: func(p *project) { p.services["loader"].env["GRIDCRAWL_METRICS_LISTEN"] = "0.0.0.0:9999" }},
		{name: "metrics port published", report: "publishes its metrics port",
			edit: func(p *project) {
				p.services["mcp"].ports = append(p.services["mcp"].ports, portMapping{host: "9464", container: "9464"})
			}},
		{name: "monitoring started by default", report: "monitoring is optional",
			edit: func(p *project) { p.services["grafana"].profiles = nil }},
		{name: "grid service in a profile", report: "would not start it",
			edit: func(p *project) { p.services["crawler"].profiles = []string{"monitoring"} }},
		{name: "prometheus configuration not mounted", report: "/etc/prometheus/prometheus.yml",
			edit: func(p *project) { p.services["prometheus"].volumes = p.services["prometheus"].volumes[1:] }},
		{name: "dashboards not mounted", report: "/var/lib/grafana/dashboards",
			edit: func(p *project) {
				p.services["grafana"].volumes = slices.DeleteFunc(p.services["grafana"].volumes, func(m mount) bool { return m.target == "/var/lib/grafana/dashboards" })
			}},
		{name: "variable no code reads", report: "GRIDCRAWL_NO_SUCH_SETTING",
			edit: func(p *project) { p.services["loader"].env["GRIDCRAWL_NO_SUCH_SETTING"] = "1" }},
		{name: "misspelled variable", report: "GRIDCRAWL_LOADER_WORKER",
			edit: func(p *project) { p.services["loader"].env["GRIDCRAWL_LOADER_WORKER"] = "8" }},
		{name: "variable without the prefix", report: "LOADER_WORKERS",
			edit: func(p *project) { p.services["loader"].env["LOADER_WORKERS"] = "8" }},
		{name: "backend not configured", report: "GRIDCRAWL_ES_URL",
			edit: func(p *project) { delete(p.services["crawler"].env, "GRIDCRAWL_ES_URL") }},
		{name: "container name on a scaled service", report: "container_name",
			edit: func(p *project) { p.services["crawler"].containerName = "crawler" }},
		{name: "host port on a scaled service", report: "host port",
			edit: func(p *project) {
				p.services["loader"].ports = append(p.services["loader"].ports, portMapping{host: "9100", container: "9100"})
			}},
		{name: "mcp port not the listen port", report: "container port 9090",
			edit: func(p *project) { p.services["mcp"].ports[0].container = "9090" }},
		{name: "mcp listens on loopback", report: "listen on 0.0.0.0",
			edit: func(p *project) { p.services["mcp"].env["GRIDCRAWL_LISTEN"] = "127.0.0.1:8080" }},
		{name: "token with a default", report: "GRIDCRAWL_API_TOKEN",
			edit: func(p *project) { p.services["mcp"].env["GRIDCRAWL_API_TOKEN"] = "changeme" }},
		{name: "dependency on a missing service", report: "redis",
			edit: func(p *project) { p.services["loader"].dependsOn["redis"] = "service_healthy" }},
		{name: "dependency only started", report: "service_healthy",
			edit: func(p *project) { p.services["mcp"].dependsOn["rabbitmq"] = "service_started" }},
		{name: "dependency without healthcheck", report: "no healthcheck",
			edit: func(p *project) { p.services["rabbitmq"].healthcheck = nil }},
		{name: "backend health probe changed", report: "/minio/health/live",
			edit: func(p *project) { p.services["minio"].healthcheck = []string{"true"} }},
		{name: "backend url names no service", report: `"rabbit"`,
			edit: func(p *project) {
				p.services["loader"].env["GRIDCRAWL_AMQP_URL"] = "amqp://u:p@rabbit:5672/"
			}},
		{name: "s3 secret differs from minio's", report: "MINIO_ROOT_PASSWORD",
			edit: func(p *project) { p.services["crawler"].env["GRIDCRAWL_S3_SECRET_KEY"] = "other" }},
		{name: "backend without dependency", report: "does not depend on it",
			edit: func(p *project) { delete(p.services["crawler"].dependsOn, "elasticsearch") }},
		{name: "required service missing", report: "service minio is missing",
			edit: func(p *project) { delete(p.services, "minio") }},
		{name: "unknown build target", report: `no stage "nope"`,
			edit: func(p *project) { p.services["mcp"].build.target = "nope" }},
		{name: "missing dockerfile", report: "deploy/Nope",
			edit: func(p *project) { p.services["mcp"].build.dockerfile = "deploy/Nope" }},
		{name: "service runs another binary", report: "want services/loader",
			edit: func(p *project) { p.services["loader"].build.target = "crawler" }},
		{name: "undeclared volume", report: "other-data",
			edit: func(p *project) { p.services["minio"].volumes[0].source = "other-data" }},
		{name: "missing bind mount file", report: "nope.conf",
			edit: func(p *project) {
				p.services["rabbitmq"].volumes = append(p.services["rabbitmq"].volumes, mount{source: "./deploy/rabbitmq/nope.conf", target: "/x", bind: true})
			}},
		{name: "elasticsearch security on", report: "xpack.security.enabled",
			edit: func(p *project) { p.services["elasticsearch"].env["xpack.security.enabled"] = "true" }},
		{name: "cluster node started by default", report: "the clusters are optional",
			edit: func(p *project) { p.services["es2"].profiles = nil }},
		{name: "cluster node missing", report: "service minio3 (profile cluster) is missing",
			edit: func(p *project) { delete(p.services, "minio3") }},
		{name: "rabbit node with another cookie", report: "share a cookie",
			edit: func(p *project) {
				p.services["rabbit3"].env["RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS"] = "-setcookie other"
				p.services["rabbit3"].env["RABBITMQ_CTL_ERL_ARGS"] = "-setcookie other"
			}},
		{name: "rabbit CLI without the cookie", report: "RABBITMQ_CTL_ERL_ARGS",
			edit: func(p *project) { delete(p.services["rabbit2"].env, "RABBITMQ_CTL_ERL_ARGS") }},
		{name: "rabbit node renamed", report: "rabbit@rabbit9",
			edit: func(p *project) { p.services["rabbit2"].hostname = "rabbit9" }},
		{name: "rabbit node without the peer list", report: "would not join",
			edit: func(p *project) {
				p.services["rabbit1"].volumes = slices.DeleteFunc(p.services["rabbit1"].volumes, func(m mount) bool { return strings.Contains(m.source, "cluster") })
			}},
		{name: "es seed hosts miss a node", report: "discovery.seed_hosts",
			edit: func(p *project) { p.services["es3"].env["discovery.seed_hosts"] = "es1,es2" }},
		{name: "es node single", report: "cluster of its own",
			edit: func(p *project) { p.services["es1"].env["discovery.type"] = "single-node" }},
		{name: "es node in another cluster", report: "cluster.name",
			edit: func(p *project) { p.services["es2"].env["cluster.name"] = "other" }},
		{name: "minio server misses a drive", report: "want server with every drive",
			edit: func(p *project) {
				p.services["minio2"].command = []string{"server", "--console-address", ":9001", "http://minio{1...3}:9000/data"}
			}},
		{name: "cluster grid misses a node", report: "want every elasticsearch node",
			edit: func(p *project) {
				p.services["crawler-cluster"].env["GRIDCRAWL_ES_URL"] = "http://es1:9200,http://es2:9200"
			}},
		{name: "cluster grid names a node twice", report: "want every minio node",
			edit: func(p *project) {
				p.services["loader-cluster"].env["GRIDCRAWL_S3_ENDPOINT"] = "minio1:9000,minio2:9000,minio3:9000,minio3:9000"
			}},
		{name: "cluster grid on the single broker", report: "want every rabbitmq node",
			edit: func(p *project) {
				p.services["mcp-cluster"].env["GRIDCRAWL_AMQP_URL"] = "amqp://u:p@rabbitmq:5672/"
			}},
		{name: "cluster grid wrong port", report: "want 9200",
			edit: func(p *project) {
				p.services["crawler-cluster"].env["GRIDCRAWL_ES_URL"] = "http://es1:9200,http://es2:9200,http://es3:9300"
			}},
		{name: "cluster grid not waiting for a node", report: "does not depend on it",
			edit: func(p *project) { delete(p.services["loader-cluster"].dependsOn, "minio4") }},
		{name: "cluster grid runs another binary", report: "not built like crawler",
			edit: func(p *project) { p.services["crawler-cluster"].build = p.services["loader"].build }},
		{name: "host port published twice", report: "both publish host port 8080",
			edit: func(p *project) { p.services["mcp-cluster"].ports[0].host = "8080" }},
		{name: "go build of a missing package", report: "services/gird",
			fsys: func() fs.FS { return editDockerfile("./services/grid", "./services/gird") }},
		{name: "binary not built", report: "stage \"crawler\" runs crawler",
			fsys: func() fs.FS { return editDockerfile(" ./services/crawler", "") }},
		{name: "go build of a library package", report: "services/internal/mcp is not",
			fsys: func() fs.FS { return editDockerfile("./services/mcp ", "./services/mcp ./services/internal/mcp ") }},
		{name: "dockerfile variable no code reads", report: "GRIDCRAWL_NOPE",
			fsys: func() fs.FS {
				return editDockerfile("ENV GRIDCRAWL_LISTEN=0.0.0.0:8080", "ENV GRIDCRAWL_LISTEN=0.0.0.0:8080 GRIDCRAWL_NOPE=1")
			}},
		{name: "minio version not the scripts' one", report: "scripts/services/minio.sh pins",
			fsys: func() fs.FS {
				return editDockerfile("github.com/minio/minio@", "github.com/minio/minio@v0.0.0-20990101000000-000000000000 github.com/minio/minio@")
			}},
		{name: "go version not go.mod's", report: "GO_VERSION=1.25",
			fsys: func() fs.FS { return editDockerfile("ARG GO_VERSION=1.26", "ARG GO_VERSION=1.25") }},
	}
	// Only problems the mistake adds count: the files as they are may have
	// some of their own, reported by TestCompose.
	baseline := check(loadProject(t, repoFS()), repoFS())
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fsys := repoFS()
			if tc.fsys != nil {
				fsys = tc.fsys()
			}
			p := loadProject(t, fsys)
			if tc.edit != nil {
				tc.edit(p)
			}
			added := slices.DeleteFunc(check(p, fsys), func(s string) bool { return slices.Contains(baseline, s) })
			if !slices.ContainsFunc(added, func(s string) bool { return strings.Contains(s, tc.report) }) {
				t.Errorf("check after %q adds the problems %q, want one mentioning %q", tc.name, added, tc.report)
			}
		})
	}
}

// TestParseCompose checks the syntaxes the checks accept.
func TestParseCompose(t *testing.T) {
	const file = `
x-env: &env
  GRIDCRAWL_A: "1"
services:
  short:
    image: example
    environment:
      - GRIDCRAWL_B=2
      - GRIDCRAWL_C
    ports: ["8080", "9000:9001", "127.0.0.1:7000:7001/tcp", "${P:-80}:81", 5000]
    depends_on: [long]
    volumes: ["data:/data", "./x:/x:ro", "/anon"]
    healthcheck:
      test: curl -f http://localhost/
  long:
    build: .
    environment:
      <<: *env
      GRIDCRAWL_D:
    ports:
      - target: 82
        published: "8082"
    depends_on:
      short:
        condition: service_healthy
    volumes:
      - type: bind
        source: ./y
        target: /y
    healthcheck:
      test: ["CMD", "wget", "http://localhost/"]
volumes:
  data:
`
	p, err := parseCompose([]byte(file))
	if err != nil {
		t.Fatalf("parseCompose: %v", err)
	}
	short, long := p.services["short"], p.services["long"]
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{"list environment", short.env, map[string]string{"GRIDCRAWL_B": "2", "GRIDCRAWL_C": ""}},
		{"merged environment", long.env, map[string]string{"GRIDCRAWL_A": "1", "GRIDCRAWL_D": ""}},
		{"short ports", short.ports, []portMapping{{"", "8080"}, {"9000", "9001"}, {"7000", "7001"}, {"${P:-80}", "81"}, {"", "5000"}}},
		{"long ports", long.ports, []portMapping{{"8082", "82"}}},
		{"list depends_on", short.dependsOn, map[string]string{"long": "service_started"}},
		{"map depends_on", long.dependsOn, map[string]string{"short": "service_healthy"}},
		{"short volumes", short.volumes, []mount{{"data", "/data", false}, {"./x", "/x", true}, {"", "/anon", false}}},
		{"long volumes", long.volumes, []mount{{"./y", "/y", true}}},
		{"shell healthcheck", short.healthcheck, []string{"curl -f http://localhost/"}},
		{"exec healthcheck", long.healthcheck, []string{"wget", "http://localhost/"}},
		{"build path", *long.build, build{context: ".", dockerfile: "Dockerfile"}},
		{"extensions", p.extensions, []string{"x-env"}},
	} {
		if !reflect.DeepEqual(tc.got, tc.want) {
			t.Errorf("%s: parseCompose = %#v, want %#v", tc.name, tc.got, tc.want)
		}
	}
	if _, err := parseCompose([]byte("services:\n  a:\n    image: x\n    depend_on: [b]\n")); err == nil {
		t.Errorf("parseCompose of a misspelled key (depend_on) = nil error, want an error")
	}
}

// dockerignore matches paths against the patterns of a .dockerignore file
// (the subset this repository uses: names, globs, a leading **/).
type dockerignore []string

func (d dockerignore) excludes(p string) bool {
	segs := strings.Split(p, "/")
	for _, pat := range d {
		anyDepth := strings.HasPrefix(pat, "**/")
		pat = strings.TrimSuffix(strings.TrimPrefix(pat, "**/"), "/")
		for start := range segs {
			if start > 0 && !anyDepth {
				break
			}
			// A pattern matches a path or any of its parent directories.
			for end := start + 1; end <= len(segs); end++ {
				if ok, _ := path.Match(pat, strings.Join(segs[start:end], "/")); ok {
					return true
				}
			}
		}
	}
	return false
}

// TestDockerignoreKeepsSources checks that the build context keeps every
// file the Go build of the images needs.
func TestDockerignoreKeepsSources(t *testing.T) {
	b, err := os.ReadFile("Dockerfile.dockerignore")
	if err != nil {
		t.Fatalf("read Dockerfile.dockerignore: %v", err)
	}
	var ign dockerignore
	for line := range strings.SplitSeq(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			if strings.HasPrefix(line, "!") {
				t.Fatalf("Dockerfile.dockerignore: exceptions (%q) are not supported by this test", line)
			}
			ign = append(ign, line)
		}
	}
	for _, tc := range []struct {
		path string
		want bool
	}{
		{".git/config", true},
		{"bin/mcp", true},
		{"pkg/warc/warc_test.go", true},
		{"pkg/warc/testdata/x.warc", true},
		{"deploy/Dockerfile", true},
		{"pkg/warc/warc.go", false},
		{"go.mod", false},
		{"services/internal/data/x.go", false},
	} {
		if got := ign.excludes(tc.path); got != tc.want {
			t.Errorf("excludes(%q) = %v, want %v", tc.path, got, tc.want)
		}
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the build's files: %v", err)
	}
	cmd := exec.CommandContext(t.Context(), goTool, "list", "-deps", "-json=Dir,Module,GoFiles,EmbedFiles", "./services/...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root = path.Dir(root)
	dec := json.NewDecoder(bytes.NewReader(out))
	files := []string{"go.mod", "go.sum"}
	for dec.More() {
		var pkg struct {
			Dir                 string
			Module              *struct{ Main bool }
			GoFiles, EmbedFiles []string
		}
		if err := dec.Decode(&pkg); err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		if pkg.Module == nil || !pkg.Module.Main {
			continue
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(pkg.Dir, root), "/")
		for _, f := range slices.Concat(pkg.GoFiles, pkg.EmbedFiles) {
			files = append(files, path.Join(rel, f))
		}
	}
	if len(files) < 10 {
		t.Fatalf("go list found only %q", files)
	}
	for _, f := range files {
		if ign.excludes(f) {
			t.Errorf("Dockerfile.dockerignore leaves %s out of the build context, but the build needs it", f)
		}
	}
}
