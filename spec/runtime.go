package spec

// DefaultRuntime is the runtime of a lab that names none.
const DefaultRuntime = RuntimeNetns

// RuntimeTraits are the facts about a runtime that the pure layers (this package's checks,
// the plan, and readers of a plan) need, as data: they ask these questions of the runtime's
// traits rather than compare its name, and stay free of I/O. A runtime whose nodes are
// network namespaces on the host, each with its own name (netns, vm, kubernetes), has the
// zero value.
type RuntimeTraits struct {
	// Containers says nodes are containers of an engine: each runs an image of its own (the
	// lab's docker: section), a segment is the engine's network (one address space shared by
	// every lab on the host), and a port may be published on the host (attach: nat). A
	// container's namespace has no name: it is reached through the runtime's node.
	Containers bool
	// Images says every node runs a container image: sfclab's node image, or the lab's own
	// (docker.image). True of the docker and kubernetes runtimes.
	Images bool
	// Machines says every service function is a virtual machine of its own (with the
	// default vm: settings unless the file gives some).
	Machines bool
}

// runtimes are the traits of every runtime a lab file may name, in the order messages list
// them: the one list of the lab-file vocabulary of runtimes (their code lives in runtime/
// and its register runtime/runtimes).
var runtimes = []struct {
	name   string
	traits RuntimeTraits
}{
	{RuntimeNetns, RuntimeTraits{}},
	{RuntimeDocker, RuntimeTraits{Containers: true, Images: true}},
	{RuntimeKubernetes, RuntimeTraits{Images: true}},
	{RuntimeVM, RuntimeTraits{Machines: true}},
}

// TraitsOf returns the traits of the runtime called name ("" is DefaultRuntime) and whether
// a lab file may name it.
func TraitsOf(name string) (RuntimeTraits, bool) {
	if name == "" {
		name = DefaultRuntime
	}
	for _, r := range runtimes {
		if r.name == name {
			return r.traits, true
		}
	}
	return RuntimeTraits{}, false
}

// RuntimeNames lists the runtimes a lab file may name.
func RuntimeNames() []string {
	names := make([]string, len(runtimes))
	for i, r := range runtimes {
		names[i] = r.name
	}
	return names
}

// Traits are the traits of the lab's runtime (the zero value for a runtime a lab file may
// not name, which Validate refuses).
func (l *Lab) Traits() RuntimeTraits {
	t, _ := TraitsOf(l.Runtime)
	return t
}
