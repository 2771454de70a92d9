// Package journal records the labs deployed on this host: one directory per lab holding its
// status and the plan it was built from, written before anything is created so that
// `sfclab destroy --all` finds a lab after a crash. Runtimes and deploy both read it; it imports
// nothing of theirs.
package journal

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/sfc"
	"github.com/sfclab/sfclab/spec"
)

// DefaultStateRoot is where labs are journaled: one directory per lab, written before anything
// is created so that `sfclab destroy --all` finds a lab after a crash. It is on tmpfs, like
// the namespaces it describes, so a reboot forgets both.
const DefaultStateRoot = "/run/sfclab/labs"

// StateRoot returns the journal directory: $SFCLAB_STATE_DIR or DefaultStateRoot.
func StateRoot() string {
	if d := os.Getenv("SFCLAB_STATE_DIR"); d != "" {
		return d
	}
	return DefaultStateRoot
}

// Lab statuses in the journal.
const (
	StatusDeploying  = "deploying"
	StatusReady      = "ready"
	StatusDestroying = "destroying"
)

// ErrNotDeployed is returned for a lab the journal does not know.
var ErrNotDeployed = errors.New("lab is not deployed")

// ErrExists is returned when deploying a lab name that is already deployed.
var ErrExists = errors.New("lab already exists")

// State is a lab's journal entry.
type State struct {
	Lab      string        `json:"lab"`
	File     string        `json:"file,omitempty"`
	Status   string        `json:"status"`
	Started  time.Time     `json:"started"`
	Deployed time.Duration `json:"deploy_ns,omitempty"`
	PID      int           `json:"pid"`
}

// Journal is the lab journal under one root directory.
type Journal struct {
	Root string
	// Kinds type the params of a stored plan (ReadPlan), given by the caller as spec.Decode
	// takes them (kinds.Spec() for the registered ones); nil leaves params raw JSON
	// (json.RawMessage), enough for readers of a plan's nodes, addresses and ports.
	Kinds spec.Kinds
}

// Dir is a lab's journal directory.
func (j Journal) Dir(lab string) string { return filepath.Join(j.Root, lab) }

// NodeDir holds per-node files (function configuration, process logs).
func (j Journal) NodeDir(lab string) string { return filepath.Join(j.Root, lab, "nodes") }

// Create makes a lab's journal directory; it fails with ErrExists if it is there already.
func (j Journal) Create(lab string) error {
	if err := os.MkdirAll(j.Root, 0o755); err != nil {
		return fmt.Errorf("create state root %s: %w", j.Root, err)
	}
	if err := os.Mkdir(j.Dir(lab), 0o755); err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("deploy lab %q: %w (journal %s); destroy it first: sfclab destroy %s", lab, ErrExists, j.Dir(lab), lab)
		}
		return fmt.Errorf("create lab journal: %w", err)
	}
	return os.Mkdir(j.NodeDir(lab), 0o755)
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// WriteState records a lab's status.
func (j Journal) WriteState(s *State) error {
	if err := writeJSON(filepath.Join(j.Dir(s.Lab), "state.json"), s); err != nil {
		return fmt.Errorf("write lab state: %w", err)
	}
	return nil
}

// WritePlan records the plan a lab is built from.
func (j Journal) WritePlan(p *plan.Plan) error {
	if err := writeJSON(filepath.Join(j.Dir(p.Lab), "plan.json"), p); err != nil {
		return fmt.Errorf("write lab plan: %w", err)
	}
	return nil
}

// SteerModelFile is the file, in a lab's journal directory, that holds the networking-sfc
// model a transparent lab's maps were last written from when it differs from the plan's
// (chains and graphs added over the API): `sfclab inspect` names the paths by it.
const SteerModelFile = "steer-model.json"

// WriteSteerModel records the model a lab's steering maps hold now.
func (j Journal) WriteSteerModel(lab string, m *sfc.Model) error {
	if err := writeJSON(filepath.Join(j.Dir(lab), SteerModelFile), m); err != nil {
		return fmt.Errorf("write steering model of lab %s: %w", lab, err)
	}
	return nil
}

// ReadSteerModel reads the model a lab's steering maps were last written from; nil (and no
// error) when only the plan's model was ever written.
func (j Journal) ReadSteerModel(lab string) (*sfc.Model, error) {
	data, err := os.ReadFile(filepath.Join(j.Dir(lab), SteerModelFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read steering model of lab %s: %w", lab, err)
	}
	var m sfc.Model
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("decode steering model of lab %s: %w", lab, err)
	}
	return &m, nil
}

// ReadState reads a lab's status.
func (j Journal) ReadState(lab string) (*State, error) {
	data, err := os.ReadFile(filepath.Join(j.Dir(lab), "state.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read lab %q: %w", lab, ErrNotDeployed)
	}
	if err != nil {
		return nil, fmt.Errorf("read lab state: %w", err)
	}
	var s State
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("decode lab state %s: %w", j.Dir(lab), err)
	}
	return &s, nil
}

// ReadPlan reads the plan a lab was built from, params typed by j.Kinds (left raw JSON
// when j.Kinds is nil).
func (j Journal) ReadPlan(lab string) (*plan.Plan, error) {
	data, err := os.ReadFile(filepath.Join(j.Dir(lab), "plan.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read lab %q: %w", lab, ErrNotDeployed)
	}
	if err != nil {
		return nil, fmt.Errorf("read lab plan: %w", err)
	}
	p, err := plan.Unmarshal(data, j.Kinds)
	if err != nil {
		return nil, fmt.Errorf("decode lab plan %s: %w", j.Dir(lab), err)
	}
	return p, nil
}

// Labs lists the journaled labs, sorted.
func (j Journal) Labs() ([]string, error) {
	ents, err := os.ReadDir(j.Root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list labs: %w", err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

// Remove deletes a lab's journal.
func (j Journal) Remove(lab string) error {
	if err := os.RemoveAll(j.Dir(lab)); err != nil {
		return fmt.Errorf("remove lab journal: %w", err)
	}
	return nil
}
