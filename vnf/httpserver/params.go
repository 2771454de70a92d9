package httpserver

import "github.com/sfclab/sfclab/spec"

// HTTP servers an http-server endpoint can run.
const (
	ServerApache = "apache"
	ServerNginx  = "nginx"
)

// HTTPServerParams are the parameters of an http-server endpoint: an origin serving objects of
// chosen sizes.
type HTTPServerParams struct {
	// Server is "apache" (default, as study B) or "nginx".
	Server string `yaml:"server,omitempty" json:"server"`
	// Port is the HTTP port (default 80).
	Port uint16 `yaml:"port,omitempty" json:"port"`
	// Objects are the sizes served, e.g. 1k, 10k, 100k, 1M, 10M (k = 1024 bytes), each at
	// /obj-SIZE (default: the five sizes of study B).
	Objects []string `yaml:"objects,omitempty" json:"objects"`
}

// ListenPort is the server's HTTP port (spec.Listener).
func (p *HTTPServerParams) ListenPort() uint16 { return p.Port }

// SetDefaults fills in apache on port 80 serving the five object sizes of study B.
func (p *HTTPServerParams) SetDefaults() {
	if p.Server == "" {
		p.Server = ServerApache
	}
	if p.Port == 0 {
		p.Port = 80
	}
	if len(p.Objects) == 0 {
		p.Objects = []string{"1k", "10k", "100k", "1M", "10M"}
	}
}

// ServedObjects are the object size names it serves (spec.ObjectServer).
func (p *HTTPServerParams) ServedObjects() []string { return p.Objects }

// Check checks the server and that every object is a size, listed once.
func (p *HTTPServerParams) Check(_ *spec.Function, pr *spec.Problems) {
	if p.Server != ServerApache && p.Server != ServerNginx {
		pr.Addf("http server %q is not one of apache, nginx", p.Server)
	}
	seen := map[string]bool{}
	for _, o := range p.Objects {
		if _, err := spec.ParseSize(o); err != nil {
			pr.Addf("%v", err)
		}
		if seen[o] {
			pr.Addf("object size %q listed twice", o)
		}
		seen[o] = true
	}
}
