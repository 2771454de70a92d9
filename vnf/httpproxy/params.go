package httpproxy

import "github.com/sfclab/sfclab/spec"

// Kind is the kind's name in a lab file (the register, vnf/kinds, maps it to this package).
const Kind = "http-proxy"

// HTTPProxyParams are the parameters of an HTTP forward proxy (Squid), with its cache off or on.
type HTTPProxyParams struct {
	// Port the proxy listens on (default 3128).
	Port uint16 `yaml:"port,omitempty" json:"port"`
	// Cache turns the cache on (default off: forwarding only).
	Cache bool `yaml:"cache,omitempty" json:"cache"`
	// CacheMem is Squid's cache_mem in MB (default 256).
	CacheMem int `yaml:"cache_mem_mb,omitempty" json:"cache_mem_mb"`
	// CacheDir is the size of an on-disk cache in MB (default 0: memory only).
	CacheDir int `yaml:"cache_dir_mb,omitempty" json:"cache_dir_mb"`
	// MaxObject is the largest object cached, in MB (default 16).
	MaxObject int `yaml:"maximum_object_size_mb,omitempty" json:"maximum_object_size_mb"`
	// Policy is the replacement policy: "lru" (default), "heap LFUDA", "heap GDSF", "heap LRU".
	Policy string `yaml:"policy,omitempty" json:"policy"`
	// Workers is Squid's SMP workers (default 1).
	Workers int `yaml:"workers,omitempty" json:"workers"`
}

// ListenPort is the proxy's port (spec.Proxy).
func (p *HTTPProxyParams) ListenPort() uint16 { return p.Port }

// ConnectPort is the origin's own port, else 80: an HTTP proxy connects to where the origin
// listens, whatever port it listens on itself (spec.Proxy).
func (p *HTTPProxyParams) ConnectPort(_, backendListens uint16) uint16 {
	if backendListens != 0 {
		return backendListens
	}
	return 80
}

// ForwardProxy marks Squid as an HTTP forward proxy: clients send it absolute URLs
// (spec.ForwardProxy).
func (*HTTPProxyParams) ForwardProxy() {}

// SetDefaults fills in port 3128, cache_mem 256 MB, maximum_object_size 16 MB, policy lru
// and one worker.
func (p *HTTPProxyParams) SetDefaults() {
	if p.Port == 0 {
		p.Port = 3128
	}
	if p.CacheMem == 0 {
		p.CacheMem = 256
	}
	if p.MaxObject == 0 {
		p.MaxObject = 16
	}
	if p.Policy == "" {
		p.Policy = "lru"
	}
	if p.Workers == 0 {
		p.Workers = 1
	}
}

// Check checks the policy, the cache sizes, the workers and that the proxy has one instance.
func (p *HTTPProxyParams) Check(fn *spec.Function, pr *spec.Problems) {
	pr.OneOf("policy", p.Policy, "lru", "heap LFUDA", "heap GDSF", "heap LRU")
	if p.CacheMem < 1 || p.CacheDir < 0 || p.MaxObject < 1 {
		pr.Addf("cache_mem_mb and maximum_object_size_mb must be positive, cache_dir_mb not negative")
	}
	if p.Workers < 1 || p.Workers > 32 {
		pr.Addf("workers must be 1-32, got %d", p.Workers)
	}
	if fn.Instances > 1 {
		pr.Addf("an http-proxy is the service address of its chain; routed steering supports one instance")
	}
}
