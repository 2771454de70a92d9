package kubernetes

import (
	"context"
	"fmt"
	"net/url"
	"strconv"

	"github.com/sfclab/sfclab/hosts"
)

// A lab's slot is its share of the VXLAN space of the cluster's nodes. Emulated hosts on one
// machine each have their own namespace and underlay, but a lab's VXLAN devices on real nodes
// are created in the node's own network namespace (hosts.Topology.UnderlayNS), shared by every
// lab there, and a namespace takes a VNI only once per UDP port and one collect_md device per
// port (measured, docs/kubernetes.md). So each lab that builds hosts takes a slot, claimed
// cluster-wide, and its network VNIs and its steering device's port are its slot's:
//
//	VNI = slot<<12 | plan VNI (the plan's VNIs are below 4096), steering port = 4790 + slot.
//
// A slot is a ConfigMap sfclab-slot-N in the agent's namespace labelled with the lab: creating
// it is the claim (the API server refuses a second one with 409), destroy deletes it, and a
// claim whose lab has no namespace left (a deploy killed with -9, then its namespace removed)
// is taken over.
const (
	// MaxSlots bounds how many labs with hosts a cluster holds at once.
	MaxSlots = 256
	// LabelSlot marks a slot's ConfigMap (its value is the slot number).
	LabelSlot = "sfclab.slot"
)

// SlotVNI is a plan VNI (below 4096) in slot's share of the VNI space.
func SlotVNI(slot int, vni uint32) uint32 { return uint32(slot)<<12 | vni }

// SlotSteerPort is slot's UDP port for the steering device.
func SlotSteerPort(slot int) int { return hosts.SteerVXLANPort + slot }

func slotName(slot int) string { return "sfclab-slot-" + strconv.Itoa(slot) }

// claimSlot takes the lowest free slot for lab (the agent's namespace must exist) and returns
// it; a slot lab holds already is returned again.
func claimSlot(ctx context.Context, c *client, lab string) (int, error) {
	if slot, ok, err := labSlot(ctx, c, lab); err != nil || ok {
		return slot, err
	}
	base := "/api/v1/namespaces/" + AgentNamespace + "/configmaps"
	for slot, tries := 0, 0; slot < MaxSlots; {
		cm := map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": slotName(slot), "labels": map[string]string{
				LabelManaged: "true", LabelLab: lab, LabelSlot: strconv.Itoa(slot)}}}
		err := c.do(ctx, "POST", base, nil, cm, nil)
		if err == nil {
			return slot, nil
		}
		if !isConflict(err) {
			return 0, fmt.Errorf("claim a VXLAN slot for lab %s: %w", lab, err)
		}
		free, err := stale(ctx, c, base+"/"+slotName(slot))
		if err != nil {
			return 0, fmt.Errorf("claim a VXLAN slot for lab %s: %w", lab, err)
		}
		if free && tries < 3 { // try the same slot again
			tries++
			continue
		}
		slot, tries = slot+1, 0
	}
	return 0, fmt.Errorf("claim a VXLAN slot for lab %s: all %d are held (destroy labs, or sfclab destroy --all)", lab, MaxSlots)
}

// stale reports whether the slot claim at path is free now: gone meanwhile, or held by a lab
// whose namespace is gone (then the claim is deleted).
func stale(ctx context.Context, c *client, path string) (bool, error) {
	var held struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	err := c.do(ctx, "GET", path, nil, nil, &held)
	if isNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	holder := held.Metadata.Labels[LabelLab]
	err = c.do(ctx, "GET", "/api/v1/namespaces/"+Namespace(holder), nil, nil, nil)
	if err == nil {
		return false, nil // held
	}
	if !isNotFound(err) {
		return false, err
	}
	if err := c.do(ctx, "DELETE", path, nil, nil, nil); err != nil && !isNotFound(err) {
		return false, fmt.Errorf("take over the slot of lab %s (gone): %w", holder, err)
	}
	return true, nil
}

// labSlot returns the slot lab holds, if any.
func labSlot(ctx context.Context, c *client, lab string) (int, bool, error) {
	var list struct {
		Items []struct {
			Metadata struct {
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
		} `json:"items"`
	}
	q := url.Values{"labelSelector": {LabelLab + "=" + lab + "," + LabelSlot}}
	err := c.do(ctx, "GET", "/api/v1/namespaces/"+AgentNamespace+"/configmaps", q, nil, &list)
	if isNotFound(err) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("find the VXLAN slot of lab %s: %w", lab, err)
	}
	for _, it := range list.Items {
		if s, err := strconv.Atoi(it.Metadata.Labels[LabelSlot]); err == nil {
			return s, true, nil
		}
	}
	return 0, false, nil
}

// releaseSlot deletes lab's slot claims; none is not an error.
func releaseSlot(ctx context.Context, c *client, lab string) error {
	q := url.Values{"labelSelector": {LabelLab + "=" + lab + "," + LabelSlot}}
	err := c.do(ctx, "DELETE", "/api/v1/namespaces/"+AgentNamespace+"/configmaps", q, nil, nil)
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("release the VXLAN slot of lab %s: %w", lab, err)
	}
	return nil
}

// inSlot puts a topology in slot's share: its networks' VNIs and its steering port. A plan
// VNI of 4096 or more (a lab of over 3000 segments) does not fit a slot's share.
func inSlot(t *hosts.Topology, slot int) (*hosts.Topology, error) {
	out := *t
	out.Networks = append([]hosts.Network(nil), t.Networks...)
	for i, n := range out.Networks {
		if n.VNI >= 1<<12 {
			return nil, fmt.Errorf("network %s: VNI %d does not fit a lab's share of the VNI space (below 4096)", n.Name, n.VNI)
		}
		out.Networks[i].VNI = SlotVNI(slot, n.VNI)
	}
	out.SteerPort = SlotSteerPort(slot)
	return &out, nil
}
