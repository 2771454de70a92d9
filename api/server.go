// Package api serves the OpenStack networking-sfc REST API (v2.0: flow classifiers, port
// pairs, port pair groups, port chains, service graphs) and a read-only Neutron view of the
// ports and networks of every lab deployed on this host, so that `openstack sfc ...`, Heat,
// Ansible or Terraform scripts written for networking-sfc drive sfclab labs unchanged.
//
// Ports: every interface of every node of every ready lab is a Neutron port named NODE-IFACE
// (e.g. f1-in, client-eth0), with a stable id (UUIDv5 of "port:LAB/NODE/IFACE" in sfclab's
// namespace, see PortID), its segment as network (NetworkID), its MAC read from the
// interface, its address as fixed IP and its node as device_id (DeviceID); binding:host_id is
// the lab, or on a transparent lab the emulated host the node sits on (its networks are the
// lab's networks). Two labs with the same node names give ports with the same name: use ids then.
//
// State: a lab's resources are stored in LAB/sfc.json in the lab journal (StateFile), written
// atomically after each change, so they survive a restart of the server and go away with
// `sfclab destroy`. A port chain is handed to the DataPlane before the API answers; a pending
// mark written before that call lets a restarted server remove a chain whose creation was
// interrupted (whole chain or none).
package api

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/sfclab/sfclab/journal"
)

// DefaultMaxBody is the largest request body the server reads (1 MiB).
const DefaultMaxBody = 1 << 20

// Config configures a Server.
type Config struct {
	// Journal is the lab journal the server reads labs from and stores resources in.
	Journal Journal
	// DataPlane receives every port chain created, changed or deleted.
	DataPlane DataPlane
	// Token, when set, must be sent as X-Auth-Token with every request (else 401).
	Token string
	// Metrics, when set, is served at /metrics (e.g. telemetry.Handler()).
	Metrics http.Handler
	// MaxBody limits request bodies (DefaultMaxBody when 0).
	MaxBody int64
	// Log receives messages about recovery and data plane cleanup (none when nil).
	Log func(format string, args ...any)
}

// Server is the networking-sfc API over the labs of one journal.
type Server struct {
	cfg Config

	mu   sync.Mutex
	labs map[string]*labState
	// broken are labs that could not be loaded, by the deploy time they failed for.
	broken map[string]time.Time
}

// labState is one ready lab: its ports and its resources.
type labState struct {
	ports *labPorts
	db    *labDB
	dir   string
}

// New opens the API over a journal: it loads the resources of every ready lab, removes from
// the data plane any chain whose creation was interrupted, and applies every stored chain
// again so the data plane matches the stored state.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Journal == nil || cfg.DataPlane == nil {
		return nil, fmt.Errorf("create api server: a journal and a data plane are required")
	}
	if cfg.MaxBody == 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.Log == nil {
		cfg.Log = func(string, ...any) {}
	}
	s := &Server{cfg: cfg, labs: map[string]*labState{}, broken: map[string]time.Time{}}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.refresh(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// refresh follows the journal: labs that became ready are loaded (and recovered), labs that
// were destroyed or redeployed are dropped and their chains removed from the data plane.
// Called with s.mu held.
func (s *Server) refresh(ctx context.Context) error {
	names, err := s.cfg.Journal.Labs()
	if err != nil {
		return fmt.Errorf("list labs: %w", err)
	}
	ready := map[string]*journal.State{}
	for _, lab := range names {
		st, err := s.cfg.Journal.ReadState(lab)
		if err != nil {
			if isNotDeployed(err) {
				continue
			}
			return err
		}
		if st.Status == journal.StatusReady {
			ready[lab] = st
		}
	}
	for lab, ls := range s.labs {
		st, ok := ready[lab]
		if ok && st.Started.Equal(ls.ports.started) {
			continue
		}
		if gp := s.graphPlane(); gp != nil {
			for _, g := range ls.db.ServiceGraphs {
				if _, ok := ls.db.fromFile(g.ID); ok {
					continue
				}
				if err := gp.RemoveGraph(ctx, lab, g.ID); err != nil {
					s.cfg.Log("remove service graph %s of lab %s from the data plane: %v", g.ID, lab, err)
				}
			}
		}
		for _, c := range ls.db.PortChains {
			if _, ok := ls.db.fromFile(c.ID); ok {
				continue // steered by the lab's deploy, gone with it
			}
			if err := s.cfg.DataPlane.RemoveChain(ctx, lab, c.ID); err != nil {
				s.cfg.Log("remove chain %s of lab %s from the data plane: %v", c.ID, lab, err)
			}
		}
		delete(s.labs, lab)
	}
	for lab, st := range ready {
		if _, ok := s.labs[lab]; ok {
			continue
		}
		if err := s.load(ctx, lab, st); err != nil && !isNotDeployed(err) {
			// One broken lab must not take the API down for the others: it is left out
			// (and said so once per deploy) until it is redeployed or destroyed.
			if !s.broken[lab].Equal(st.Started) {
				s.cfg.Log("lab %s is left out of the API: %v", lab, err)
				s.broken[lab] = st.Started
			}
		}
	}
	return nil
}

// load reads a ready lab's ports and resources and recovers them.
func (s *Server) load(ctx context.Context, lab string, st *journal.State) error {
	ports, err := readLabPorts(s.cfg.Journal, lab, st)
	if err != nil {
		return err
	}
	dir := s.cfg.Journal.Dir(lab)
	db, err := loadDB(dir, lab)
	if err != nil {
		return err
	}
	p, err := s.cfg.Journal.ReadPlan(lab)
	if err != nil {
		return fmt.Errorf("read lab file resources of lab %s: %w", lab, err)
	}
	file, names, err := fileResources(lab, p)
	if err != nil {
		return err
	}
	db.addFile(file, names)
	ls := &labState{ports: ports, db: db, dir: dir}
	s.labs[lab] = ls
	if err := s.recover(ctx, ls); err != nil {
		delete(s.labs, lab)
		return err
	}
	delete(s.broken, lab)
	return nil
}

// recover finishes what a killed server left: a chain marked pending is removed from the data
// plane (the client never got its 201), and every stored chain is applied again.
func (s *Server) recover(ctx context.Context, ls *labState) error {
	db := ls.db
	if db.Pending != nil {
		for _, id := range db.Pending.Chains {
			if db.pc(id) == nil {
				s.cfg.Log("lab %s: port chain %s was being created when the server stopped; removing it", db.Lab, id)
				if err := s.cfg.DataPlane.RemoveChain(ctx, db.Lab, id); err != nil {
					return fmt.Errorf("recover lab %s: remove interrupted chain %s: %w", db.Lab, id, err)
				}
			}
		}
		db.Pending = nil
		if err := db.save(ls.dir); err != nil {
			return fmt.Errorf("recover lab %s: %w", db.Lab, err)
		}
	}
	for _, pc := range db.PortChains {
		if _, ok := db.fromFile(pc.ID); ok {
			continue
		}
		c, err := s.resolve(ls, pc)
		if err != nil {
			return fmt.Errorf("recover lab %s: %w", db.Lab, err)
		}
		if err := s.cfg.DataPlane.ApplyChain(ctx, c); err != nil {
			return fmt.Errorf("recover lab %s: apply chain %s: %w", db.Lab, pc.ID, err)
		}
	}
	if gp := s.graphPlane(); gp != nil {
		for _, g := range db.ServiceGraphs {
			if _, ok := db.fromFile(g.ID); ok {
				continue
			}
			if err := gp.ApplyGraph(ctx, resolveGraph(db, g)); err != nil {
				return fmt.Errorf("recover lab %s: apply service graph %s: %w", db.Lab, g.ID, err)
			}
		}
	}
	return nil
}

// Chains returns every stored port chain resolved as the data plane receives it, for
// `sfclab inspect` and tests.
func (s *Server) Chains(ctx context.Context) ([]*Chain, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.refresh(ctx); err != nil {
		return nil, err
	}
	var out []*Chain
	for _, lab := range s.labNames() {
		ls := s.labs[lab]
		for _, pc := range ls.db.PortChains {
			c, err := s.resolve(ls, pc)
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
	}
	return out, nil
}

func (s *Server) labNames() []string {
	out := make([]string, 0, len(s.labs))
	for l := range s.labs {
		out = append(out, l)
	}
	sort.Strings(out)
	return out
}

// Handler returns the HTTP handler: the networking-sfc and Neutron routes, behind the token
// check when a token is configured, with request bodies limited.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.versions)
	mux.HandleFunc("GET /v2.0", s.v2)
	mux.HandleFunc("GET /v2.0/{$}", s.v2)
	mux.HandleFunc("GET /v2.0/extensions", s.extensions)
	mux.HandleFunc("GET /v2.0/extensions/{alias}", s.extension)
	mux.HandleFunc("GET /v2.0/ports", s.neutronList("ports"))
	mux.HandleFunc("GET /v2.0/ports/{id}", s.neutronShow("ports"))
	mux.HandleFunc("GET /v2.0/networks", s.neutronList("networks"))
	mux.HandleFunc("GET /v2.0/networks/{id}", s.neutronShow("networks"))
	mux.HandleFunc("GET /v2.0/subnets", s.neutronList("subnets"))
	mux.HandleFunc("GET /v2.0/subnets/{id}", s.neutronShow("subnets"))
	for _, k := range kinds {
		base := "/v2.0/sfc/" + k.plural
		mux.HandleFunc("GET "+base, s.list(k))
		mux.HandleFunc("POST "+base, s.create(k))
		mux.HandleFunc("GET "+base+"/{id}", s.show(k))
		mux.HandleFunc("PUT "+base+"/{id}", s.update(k))
		mux.HandleFunc("DELETE "+base+"/{id}", s.delete(k))
		mux.HandleFunc("DELETE "+base, func(w http.ResponseWriter, r *http.Request) {
			writeError(w, k.notFound("None")) // neutron takes a DELETE without an id as id None
		})
	}
	if s.cfg.Metrics != nil {
		mux.Handle("GET /metrics", s.cfg.Metrics)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &Error{Status: http.StatusNotFound, Type: "HTTPNotFound", Message: "The resource could not be found."})
	})
	var h http.Handler = mux
	h = s.limit(h)
	if s.cfg.Token != "" {
		h = s.auth(h)
	}
	return requestID(h)
}

// requestID gives every answer an X-Openstack-Request-Id, as neutron's request_id middleware
// does (first in its pipeline, so errors and 401s too): the OpenStack client prints it with
// every error ("Neutron server returns request_ids: ['req-...']").
func requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Openstack-Request-Id", "req-"+uuid.NewString())
		next.ServeHTTP(w, r)
	})
}

// auth refuses requests without the configured X-Auth-Token, as Keystone-backed Neutron does.
func (s *Server) auth(next http.Handler) http.Handler {
	want := []byte(s.cfg.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("X-Auth-Token"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Keystone uri="none"`)
			writeError(w, &Error{Status: http.StatusUnauthorized, Type: "HTTPUnauthorized",
				Message: "The request you have made requires authentication."})
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) limit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > s.cfg.MaxBody {
			writeError(w, &Error{Status: http.StatusRequestEntityTooLarge, Type: "HTTPRequestEntityTooLarge",
				Message: fmt.Sprintf("Request is too large: the limit is %d bytes.", s.cfg.MaxBody)})
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBody)
		next.ServeHTTP(w, r)
	})
}

// extensionList are the API extensions served, as GET /v2.0/extensions lists them.
var extensionList = []map[string]any{
	{"alias": "flow_classifier", "name": "Flow Classifier", "description": "Flow Classifier Extension.", "updated": "2015-10-05T10:00:00-00:00", "links": []any{}},
	{"alias": "sfc", "name": "Service Function Chaining", "description": "Service Function Chain extension.", "updated": "2015-10-05T10:00:00-00:00", "links": []any{}},
	{"alias": "service_graph", "name": "Service Graph", "description": "Service Graph extension.", "updated": "2017-09-20T10:00:00-00:00", "links": []any{}},
	{"alias": "networking-sfc-tap", "name": "Networking SFC Passive Tap Service Function support", "description": "Extension for Passive TAP Service Function support", "updated": "2017-10-20T10:00:00-00:00", "links": []any{}},
}

func (s *Server) versions(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"versions": []map[string]any{{
		"id": "v2.0", "status": "CURRENT",
		"links": []map[string]string{{"rel": "self", "href": baseURL(r) + "/v2.0/"}},
	}}})
}

func (s *Server) v2(w http.ResponseWriter, r *http.Request) {
	var res []map[string]any
	for _, name := range []string{"networks", "ports", "subnets"} {
		res = append(res, map[string]any{"name": strings.TrimSuffix(name, "s"), "collection": name,
			"links": []map[string]string{{"rel": "self", "href": baseURL(r) + "/v2.0/" + name}}})
	}
	writeJSON(w, http.StatusOK, map[string]any{"resources": res})
}

func (s *Server) extensions(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"extensions": extensionList})
}

func (s *Server) extension(w http.ResponseWriter, r *http.Request) {
	alias := r.PathValue("alias")
	for _, e := range extensionList {
		if e["alias"] == alias {
			writeJSON(w, http.StatusOK, map[string]any{"extension": e})
			return
		}
	}
	writeError(w, &Error{Status: http.StatusNotFound, Type: "HTTPNotFound", Message: fmt.Sprintf("Extension with alias %s does not exist", alias)})
}

func baseURL(r *http.Request) string { return "http://" + r.Host }

// neutronItems lists the ports, networks or subnets of every ready lab.
func (s *Server) neutronItems(collection string) []any {
	var out []any
	for _, lab := range s.labNames() {
		lp := s.labs[lab].ports
		switch collection {
		case "ports":
			for _, p := range lp.ports {
				out = append(out, p)
			}
		case "networks":
			for _, n := range lp.networks {
				out = append(out, n)
			}
		case "subnets":
			for _, n := range lp.subnets {
				out = append(out, n)
			}
		}
	}
	return out
}

func (s *Server) neutronList(collection string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if err := s.refresh(r.Context()); err != nil {
			writeError(w, err)
			return
		}
		body, err := listBody(s.neutronItems(collection), r, collection, nil)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, body)
	}
}

func (s *Server) neutronShow(collection string) http.HandlerFunc {
	singular := strings.TrimSuffix(collection, "s")
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if err := s.refresh(r.Context()); err != nil {
			writeError(w, err)
			return
		}
		id := r.PathValue("id")
		for _, it := range s.neutronItems(collection) {
			m := toMap(it)
			if m["id"] == id {
				writeJSON(w, http.StatusOK, map[string]any{singular: selectFields(m, r.URL.Query())})
				return
			}
		}
		typ := map[string]string{"ports": "PortNotFound", "networks": "NetworkNotFound", "subnets": "SubnetNotFound"}[collection]
		writeError(w, notFound(typ, "%s %s could not be found.", strings.ToUpper(singular[:1])+singular[1:], id))
	}
}

// toMap is an item as its JSON object. Its objects and lists stay as encoded (json.RawMessage),
// so that nested keys keep the order networking-sfc answers them in (a port pair group's
// ppg_n_tuple_mapping has ingress_n_tuple first, and clients print keys in the order given);
// scalars are decoded, for filters.
func toMap(v any) map[string]any {
	data, _ := json.Marshal(v)
	var raw map[string]json.RawMessage
	_ = json.Unmarshal(data, &raw)
	m := make(map[string]any, len(raw))
	for k, r := range raw {
		if t := bytes.TrimSpace(r); len(t) > 0 && (t[0] == '{' || t[0] == '[') {
			m[k] = r
			continue
		}
		var x any
		_ = json.Unmarshal(r, &x)
		m[k] = x
	}
	return m
}

func matches(m map[string]any, q url.Values) bool {
	for key, want := range q {
		if slices.Contains(queryControl, key) {
			continue
		}
		v, ok := m[key]
		if !ok {
			continue
		}
		var got string
		switch x := v.(type) {
		case nil:
			got = ""
		case string:
			got = x
		case bool:
			got = strconv.FormatBool(x)
		case float64:
			got = strconv.FormatFloat(x, 'f', -1, 64)
		default:
			continue // lists and dicts are not filterable
		}
		if !slices.ContainsFunc(want, func(w string) bool {
			if _, isBool := v.(bool); isBool {
				return strings.EqualFold(w, got)
			}
			return w == got || (v == nil && strings.EqualFold(w, "none"))
		}) {
			return false
		}
	}
	return true
}

func selectFields(m map[string]any, q url.Values) map[string]any {
	fs := q["fields"]
	if len(fs) == 0 {
		return m
	}
	out := map[string]any{}
	for _, f := range fs {
		for _, name := range strings.Split(f, ",") {
			if v, ok := m[name]; ok {
				out[name] = v
			}
		}
	}
	return out
}

// findPort is a port of any ready lab by id.
func (s *Server) findPort(id string) (*Port, *labState) {
	for _, ls := range s.labs {
		for _, p := range ls.ports.ports {
			if p.ID == id {
				return p, ls
			}
		}
	}
	return nil, nil
}

// deadline bounds a data plane call.
const dataPlaneTimeout = 30 * time.Second
