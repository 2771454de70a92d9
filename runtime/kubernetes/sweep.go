package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sfclab/sfclab/runtime/netns"
	"github.com/sfclab/sfclab/steer"
)

// A Kubernetes node that leaves the cluster while a lab has pods there, and comes back after
// the lab was destroyed, still holds what its agent made for the lab (its pods' network
// namespace names sfc.LAB.*, emulated hosts, fabric, pinned steering maps, the lab's
// directory NodeStateRoot/LAB): destroy could not ask that node's agent. The agent therefore
// marks every lab it builds on its node (labMarkRoot/LAB: the lab's Kubernetes namespace's
// UID), and before each deploy sfclab lists the labs that live (their namespaces) and asks the
// agent on each of the deploy's nodes to sweep (AgentSweep): it removes, as AgentDestroy does,
// every marked lab that no longer lives, and the deploy tells the user, a line per lab swept,
// which node held it and what was removed (Runtime.Log). Only marked labs are candidates, so
// nothing the agent did not make (a netns or docker lab on the same machine, which has no
// mark) is touched.

// AgentSweep removes the state of marked labs that no longer live (AgentSweepRequest,
// AgentSweepAnswer).
const AgentSweep = "sweep"

// labMarkRoot is where the agent marks, on its node (under nodeRoot), the labs it built
// there: one file per lab, kept across the node's restarts as NodeStateRoot is.
const labMarkRoot = "/var/lib/sfclab-agent/labs"

// labMarkDir is labMarkRoot (tests of the agent's requests change it).
var labMarkDir = labMarkRoot

// SweepGrace is how old a lab's mark must be before a sweep may remove the lab: a lab whose
// namespace was created after sfclab listed the live labs (another deploy, racing) has a
// mark younger than that.
const SweepGrace = 2 * time.Minute

// AgentSweepRequest names the labs that live: every lab namespace in the cluster (not being
// deleted) by lab name, with its UID; and labs of sfclab's own journal (Local), of any
// runtime, that the sweep must leave alone whatever their marks say.
type AgentSweepRequest struct {
	Live  map[string]string `json:"live"`
	Local []string          `json:"local,omitempty"`
}

// AgentSweepAnswer names the labs swept and what of each the agent removed.
type AgentSweepAnswer struct {
	Swept []string `json:"swept,omitempty"`
	// Removed is, by lab swept, what of it was on the node before the sweep (labState); a
	// lab with nothing there but its mark has no entry.
	Removed map[string][]string `json:"removed,omitempty"`
}

// labMark is the agent's mark of a lab it built on its node.
type labMark struct {
	Lab string `json:"lab"`
	// UID is the lab's Kubernetes namespace's UID when it was built ("" when not known).
	UID string `json:"uid,omitempty"`
	// Made is when the mark was written (the file's modification time, the node's clock).
	Made time.Time `json:"-"`
}

// sweepable returns the marked labs a sweep removes: those whose namespace is not among the
// live ones (or is a new namespace of the same name: another UID), that are not labs of
// sfclab's own journal, and whose mark is at least SweepGrace old at now.
func sweepable(marks []labMark, req AgentSweepRequest, now time.Time) []string {
	var out []string
	for _, m := range marks {
		uid, live := req.Live[m.Lab]
		switch {
		case live && (m.UID == "" || uid == m.UID):
			continue // the lab lives
		case slices.Contains(req.Local, m.Lab):
			continue // sfclab's machine has a lab of that name, of some runtime
		case now.Sub(m.Made) < SweepGrace:
			continue // built after (or around) the list: a deploy racing the sweep
		}
		out = append(out, m.Lab)
	}
	slices.Sort(out)
	return out
}

// markLab records that the agent builds lab on its node (namespace UID uid).
func markLab(lab, uid string) error {
	if err := checkLabName(lab); err != nil {
		return err
	}
	dir := filepath.Join(nodeRoot(), labMarkDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("mark lab %s on the node: %w", lab, err)
	}
	data, _ := json.Marshal(labMark{Lab: lab, UID: uid})
	if err := os.WriteFile(filepath.Join(dir, lab), data, 0o644); err != nil {
		return fmt.Errorf("mark lab %s on the node: %w", lab, err)
	}
	return nil
}

// unmarkLab removes lab's mark (agentDestroy); no mark is not an error.
func unmarkLab(lab string) error {
	if err := checkLabName(lab); err != nil {
		return err
	}
	dir := filepath.Join(nodeRoot(), labMarkDir)
	if err := os.Remove(filepath.Join(dir, lab)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove the mark of lab %s: %w", lab, err)
	}
	// The directories go with the last mark (both fail while another lab's is there).
	if os.Remove(dir) == nil {
		_ = os.Remove(filepath.Dir(dir))
	}
	return nil
}

// readMarks reads the marks on the agent's node; none is not an error.
func readMarks() ([]labMark, error) {
	dir := filepath.Join(nodeRoot(), labMarkDir)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the labs' marks: %w", err)
	}
	var marks []labMark
	for _, e := range ents {
		if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		m := labMark{Lab: e.Name(), Made: info.ModTime()}
		if data, err := os.ReadFile(filepath.Join(dir, e.Name())); err == nil {
			var in labMark
			if json.Unmarshal(data, &in) == nil && in.Lab == m.Lab {
				m.UID = in.UID
			}
		}
		marks = append(marks, m)
	}
	return marks, nil
}

// agentSweep removes, as agentDestroy does, the labs marked on the node that no longer live
// (sweepable).
func agentSweep(req AgentSweepRequest) (*AgentSweepAnswer, error) {
	if req.Live == nil {
		return nil, errors.New("no live labs named (an empty list is {})")
	}
	marks, err := readMarks()
	if err != nil {
		return nil, err
	}
	ans := &AgentSweepAnswer{Removed: map[string][]string{}}
	var errs []error
	for _, lab := range sweepable(marks, req, time.Now()) {
		state := labState(lab)
		if err := agentDestroy(lab); err != nil {
			errs = append(errs, fmt.Errorf("sweep lab %s: %w", lab, err))
			continue
		}
		ans.Swept = append(ans.Swept, lab)
		if len(state) > 0 {
			ans.Removed[lab] = state
		}
	}
	return ans, errors.Join(errs...)
}

// labState says what of lab is on the agent's node, what agentDestroy removes: its network
// namespace names (its pods', emulated hosts', fabric), its pinned steering maps and its
// directory on the node (nodeLabDir).
func labState(lab string) []string {
	var out []string
	if names, _ := (netns.Runtime{}).Leftovers(context.Background(), lab); len(names) > 0 {
		slices.Sort(names)
		out = append(out, "network namespaces "+strings.Join(names, ", "))
	}
	var pins []string
	if _, err := os.Stat(steer.PinDir(lab)); err == nil {
		pins = append(pins, steer.PinDir(lab))
	}
	parts, _ := filepath.Glob(steer.PinDir(steer.NodePin(lab, "*")))
	if pins = append(pins, parts...); len(pins) > 0 {
		out = append(out, "steering maps pinned at "+strings.Join(pins, ", "))
	}
	if _, err := os.Stat(filepath.Join(nodeRoot(), nodeLabDir(lab))); err == nil {
		out = append(out, "directory "+nodeLabDir(lab))
	}
	return out
}

// sweptLines are the lines a deploy prints for what the agent on Kubernetes node node swept
// (ans): one per lab, naming the node and what was removed.
func sweptLines(node string, ans AgentSweepAnswer) []string {
	var out []string
	for _, lab := range ans.Swept {
		what := "nothing but its mark was left"
		if r := ans.Removed[lab]; len(r) > 0 {
			what = "removed " + strings.Join(r, "; ")
		}
		out = append(out, fmt.Sprintf("swept destroyed lab %s from Kubernetes node %s: %s", lab, node, what))
	}
	return out
}

// sweepNodes asks the agent on each of a deploy's Kubernetes nodes (agents: node -> agent pod)
// to sweep the destroyed labs it still holds, given the labs that live now: the cluster's lab
// namespaces not being deleted, and the labs of sfclab's own journal. Each lab swept is told
// on Log, with its node and what was removed (sweptLines).
//
// Equivalent to: kubectl get namespaces -l sfclab.managed=true; for each node:
// kubectl exec AGENT -- sfclab agent sweep <live.json
func (r Runtime) sweepNodes(ctx context.Context, c *client, agents map[string]string) error {
	var list struct {
		Items []struct {
			Metadata struct {
				UID               string            `json:"uid"`
				Labels            map[string]string `json:"labels"`
				DeletionTimestamp *string           `json:"deletionTimestamp"`
			} `json:"metadata"`
		}
	}
	q := url.Values{"labelSelector": {LabelManaged + "=true"}}
	if err := c.do(ctx, "GET", "/api/v1/namespaces", q, nil, &list); err != nil {
		return fmt.Errorf("list the live labs before sweeping the nodes: %w", err)
	}
	req := AgentSweepRequest{Live: map[string]string{}}
	for _, ns := range list.Items {
		if l := ns.Metadata.Labels[LabelLab]; l != "" && ns.Metadata.DeletionTimestamp == nil {
			req.Live[l] = ns.Metadata.UID
		}
	}
	local, err := r.journal().Labs()
	if err != nil {
		return fmt.Errorf("list this machine's labs before sweeping the nodes: %w", err)
	}
	req.Local = local
	var errs []error
	for _, kn := range slices.Sorted(maps.Keys(agents)) {
		var ans AgentSweepAnswer
		if err := agentCall(ctx, c, kn, agents[kn], AgentSweep, req, &ans); err != nil {
			errs = append(errs, fmt.Errorf("remove destroyed labs' state on Kubernetes node %s: %w", kn, err))
			continue
		}
		for _, line := range sweptLines(kn, ans) {
			r.logf("%s", line)
		}
	}
	return errors.Join(errs...)
}
