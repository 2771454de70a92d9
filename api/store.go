package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// StateFile is the file, in a lab's journal directory, that holds the lab's networking-sfc
// resources. `sfclab destroy` removes it with the journal.
const StateFile = "sfc.json"

// labDB is the networking-sfc resources of one lab, as stored in LAB/sfc.json. Every resource
// belongs to the lab of the ports it names (a port chain to the lab of its groups and
// classifiers); a chain never spans labs.
type labDB struct {
	Lab             string            `json:"lab"`
	FlowClassifiers []*FlowClassifier `json:"flow_classifiers"`
	PortPairs       []*PortPair       `json:"port_pairs"`
	PortPairGroups  []*PortPairGroup  `json:"port_pair_groups"`
	PortChains      []*PortChain      `json:"port_chains"`
	ServiceGraphs   []*ServiceGraph   `json:"service_graphs"`
	// Pending is written before a port chain is handed to the data plane and cleared once the
	// chain is stored: a server killed in between finds it at start and removes the chain from
	// the data plane, so the chain is there whole or not at all.
	Pending *pending `json:"pending,omitempty"`

	// file names the resources that come from the lab file (id -> name there): listed with
	// the others, never written to sfc.json (see addFile).
	file map[string]string
}

type pending struct {
	Op     string    `json:"op"`
	Chains []string  `json:"chains"`
	Since  time.Time `json:"since"`
}

// loadDB reads a lab's resources; a lab without the file has none.
func loadDB(dir, lab string) (*labDB, error) {
	data, err := os.ReadFile(filepath.Join(dir, StateFile))
	if errors.Is(err, os.ErrNotExist) {
		return &labDB{Lab: lab}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read sfc state of lab %s: %w", lab, err)
	}
	db := &labDB{}
	if err := json.Unmarshal(data, db); err != nil {
		return nil, fmt.Errorf("decode sfc state %s: %w", filepath.Join(dir, StateFile), err)
	}
	db.Lab = lab
	return db, nil
}

// save writes the lab's resources atomically: a temporary file renamed over the old one, so a
// reader (or a restart after kill -9 of the server) sees the old state or the new, never a
// mix. There is no fsync: it guards against power loss, after which the lab's namespaces are
// gone too, and it costs milliseconds per request on a disk-backed journal.
//
// Equivalent to: cat > sfc.json.tmp && mv sfc.json.tmp sfc.json
func (db *labDB) save(dir string) error {
	data, err := json.MarshalIndent(db.stored(), "", "  ")
	if err != nil {
		return fmt.Errorf("encode sfc state of lab %s: %w", db.Lab, err)
	}
	path := filepath.Join(dir, StateFile)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("write sfc state of lab %s: %w", db.Lab, err)
	}
	_, werr := f.Write(append(data, '\n'))
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write sfc state of lab %s: %w", db.Lab, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write sfc state of lab %s: %w", db.Lab, err)
	}
	return nil
}

func (db *labDB) fc(id string) *FlowClassifier {
	i := slices.IndexFunc(db.FlowClassifiers, func(x *FlowClassifier) bool { return x.ID == id })
	if i < 0 {
		return nil
	}
	return db.FlowClassifiers[i]
}

func (db *labDB) pp(id string) *PortPair {
	i := slices.IndexFunc(db.PortPairs, func(x *PortPair) bool { return x.ID == id })
	if i < 0 {
		return nil
	}
	return db.PortPairs[i]
}

func (db *labDB) ppg(id string) *PortPairGroup {
	i := slices.IndexFunc(db.PortPairGroups, func(x *PortPairGroup) bool { return x.ID == id })
	if i < 0 {
		return nil
	}
	return db.PortPairGroups[i]
}

func (db *labDB) pc(id string) *PortChain {
	i := slices.IndexFunc(db.PortChains, func(x *PortChain) bool { return x.ID == id })
	if i < 0 {
		return nil
	}
	return db.PortChains[i]
}

func (db *labDB) sg(id string) *ServiceGraph {
	i := slices.IndexFunc(db.ServiceGraphs, func(x *ServiceGraph) bool { return x.ID == id })
	if i < 0 {
		return nil
	}
	return db.ServiceGraphs[i]
}

// groupOf is the group that holds a port pair, or nil.
func (db *labDB) groupOf(ppID string) *PortPairGroup {
	for _, g := range db.PortPairGroups {
		if slices.Contains(g.PortPairs, ppID) {
			return g
		}
	}
	return nil
}

// chainsOfGroup lists the chains that use a group.
func (db *labDB) chainsOfGroup(ppgID string) []*PortChain {
	var out []*PortChain
	for _, c := range db.PortChains {
		if slices.Contains(c.PortPairGroups, ppgID) {
			out = append(out, c)
		}
	}
	return out
}

// chainOfClassifier is the chain that uses a flow classifier, or nil.
func (db *labDB) chainOfClassifier(fcID string) *PortChain {
	for _, c := range db.PortChains {
		if slices.Contains(c.FlowClassifiers, fcID) {
			return c
		}
	}
	return nil
}

// graphOfChain is the service graph a chain is in, or nil.
func (db *labDB) graphOfChain(pcID string) *ServiceGraph {
	for _, g := range db.ServiceGraphs {
		for src, dsts := range g.PortChains {
			if src == pcID || slices.Contains(dsts, pcID) {
				return g
			}
		}
	}
	return nil
}

// remove returns a new slice without x (the old slice stays intact, so a failed save can
// restore it).
func remove[T any](s []*T, x *T) []*T {
	out := make([]*T, 0, len(s))
	for _, y := range s {
		if y != x {
			out = append(out, y)
		}
	}
	return out
}

// StoredChain is a port chain as `sfclab inspect` shows it: names where they were given, ids
// otherwise.
type StoredChain struct {
	ID, Name    string
	Groups      []string
	Classifiers []string
}

// StoredChains reads the port chains created over the API for a lab from its journal
// (none when the API was never used on it); groups and classifiers of the lab file they use
// are named as in the file.
func StoredChains(j Journal, lab string) ([]StoredChain, error) {
	db, err := loadDB(j.Dir(lab), lab)
	if err != nil {
		return nil, err
	}
	if p, err := j.ReadPlan(lab); err == nil {
		if file, names, err := fileResources(lab, p); err == nil {
			db.addFile(file, names)
		}
	}
	label := func(name, id string) string {
		if name != "" {
			return name
		}
		return id
	}
	var out []StoredChain
	for _, pc := range db.PortChains {
		if _, ok := db.fromFile(pc.ID); ok {
			continue // the plan shows the file's chains
		}
		sc := StoredChain{ID: pc.ID, Name: pc.Name}
		for _, id := range pc.PortPairGroups {
			if g := db.ppg(id); g != nil {
				sc.Groups = append(sc.Groups, label(g.Name, id))
			}
		}
		for _, id := range pc.FlowClassifiers {
			if fc := db.fc(id); fc != nil {
				sc.Classifiers = append(sc.Classifiers, label(fc.Name, id))
			}
		}
		out = append(out, sc)
	}
	return out, nil
}
