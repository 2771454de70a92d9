package docker

import "time"

// Steps Runtime.Trace receives. An engine call (one per object) is named by what it does; a
// stage (wall time of a set of calls run concurrently) starts with "stage.".
const (
	StepPing          = "ping"              // first contact with the engine
	StepCheckNames    = "check-names"       // container and network lists of Preflight
	StepImage         = "image"             // image inspect (and build or pull)
	StepNetworkCreate = "network-create"    // one network
	StepBridgeRules   = "bridge-rules"      // the lab's DOCKER-USER and nat rules, one iptables-restore
	StepCreate        = "container-create"  // one container
	StepConnect       = "network-connect"   // one extra network of one container
	StepStart         = "container-start"   // one container
	StepInspect       = "container-inspect" // one container, for its PID
	StepOpenNS        = "open-netns"        // one container's network namespace
	StepRename        = "rename-links"      // one container's interfaces named, default routes gone
	StepRemove        = "container-remove"  // one container (destroy)
	StepNetworkRemove = "network-remove"    // one network (destroy)
	StageNetworks     = "stage.networks"    // every network of a lab
	StageContainers   = "stage.containers"  // every container created, connected and started
	StageLink         = "stage.link"        // Link: connects left over, names, routes
	StageDestroy      = "stage.destroy"     // Destroy
)

// trace reports how long step took since start to r.Trace, when set.
func (r Runtime) trace(step string, start time.Time) {
	if r.Trace != nil {
		r.Trace(step, time.Since(start))
	}
}
