package api

import (
	"context"
	"net/http"
	"net/url"
	"slices"
)

// kind is one networking-sfc resource type: its URL collection, body key, attributes, and
// what create, update and delete do.
type kind struct {
	plural, singular string
	attrs            map[string]attr
	notFound         func(id string) *Error
	items            func(db *labDB) []any
	find             func(db *labDB, id string) any
	create           func(s *Server, ctx context.Context, f fields) (any, error)
	update           func(s *Server, ctx context.Context, ls *labState, id string, f fields) (any, error)
	del              func(s *Server, ctx context.Context, ls *labState, id string) error
}

// kinds are the resources served under /v2.0/sfc/.
var kinds = []*kind{fcKind, ppKind, ppgKind, pcKind, sgKind}

func items[T any](s []*T) []any {
	out := make([]any, len(s))
	for i, x := range s {
		out[i] = x
	}
	return out
}

// found turns a typed nil pointer into an untyped nil.
func found[T any](x *T) any {
	if x == nil {
		return nil
	}
	return x
}

// lookup finds a resource of kind k in any lab.
func (s *Server) lookup(k *kind, id string) (any, *labState) {
	for _, lab := range s.labNames() {
		ls := s.labs[lab]
		if x := k.find(ls.db, id); x != nil {
			return x, ls
		}
	}
	return nil, nil
}

func (s *Server) list(k *kind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if err := s.refresh(r.Context()); err != nil {
			writeError(w, err)
			return
		}
		var all []any
		for _, lab := range s.labNames() {
			all = append(all, k.items(s.labs[lab].db)...)
		}
		body, err := listBody(all, r, k.plural, k.fieldsQuery)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, body)
	}
}

func (s *Server) show(k *kind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if err := s.refresh(r.Context()); err != nil {
			writeError(w, err)
			return
		}
		x, _ := s.lookup(k, r.PathValue("id"))
		if x == nil {
			writeError(w, k.notFound(r.PathValue("id")))
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{k.singular: selectFields(toMap(x), k.fieldsQuery(r.URL.Query()))})
	}
}

func (s *Server) create(k *kind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		f, err := decodeBody(r, k.singular, k.attrs, true)
		if err != nil {
			writeError(w, err)
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), dataPlaneTimeout)
		defer cancel()
		if err := s.refresh(ctx); err != nil {
			writeError(w, err)
			return
		}
		x, err := k.create(s, ctx, f)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusCreated, map[string]any{k.singular: x})
	}
}

func (s *Server) update(k *kind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		f, err := decodeBody(r, k.singular, k.attrs, false)
		if err != nil {
			writeError(w, err)
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), dataPlaneTimeout)
		defer cancel()
		id := r.PathValue("id")
		ls, err := s.writable(ctx, k, id)
		if err != nil {
			writeError(w, err)
			return
		}
		x, err := k.update(s, ctx, ls, id, f)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{k.singular: x})
	}
}

// writable refreshes the labs and returns the lab holding resource id of kind k, or the error
// to answer with: not found, or read-only because it comes from the lab file. The caller holds
// s.mu.
func (s *Server) writable(ctx context.Context, k *kind, id string) (*labState, error) {
	if err := s.refresh(ctx); err != nil {
		return nil, err
	}
	_, ls := s.lookup(k, id)
	if ls == nil {
		return nil, k.notFound(id)
	}
	if name, ok := ls.db.fromFile(id); ok {
		return nil, readOnly(k, ls.db.Lab, id, name)
	}
	return ls, nil
}

func (s *Server) delete(k *kind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), dataPlaneTimeout)
		defer cancel()
		id := r.PathValue("id")
		ls, err := s.writable(ctx, k, id)
		if err != nil {
			writeError(w, err)
			return
		}
		if err := k.del(s, ctx, ls, id); err != nil {
			writeError(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

// nameAndDescription applies name and description from a body (create or update).
func nameAndDescription(f fields, name, description *string) error {
	if v, ok, err := f.str("name", nameMax); err != nil {
		return err
	} else if ok {
		*name = v
	}
	if v, ok, err := f.str("description", descriptionMax); err != nil {
		return err
	} else if ok {
		*description = v
	}
	return nil
}

// tenant applies tenant_id or project_id from a create body.
func tenant(f fields, tenantID, projID *string) error {
	*tenantID, *projID = projectID, projectID
	for _, k := range []string{"project_id", "tenant_id"} {
		if v, ok, err := f.str(k, 255); err != nil {
			return err
		} else if ok && v != "" {
			*tenantID, *projID = v, v
		}
	}
	return nil
}

// fieldsQuery is the list or show query with, for service graphs, tenant_id added to a
// ?fields= selection: networking-sfc's service graph answers carry it whatever fields ask.
func (k *kind) fieldsQuery(q url.Values) url.Values {
	if k != sgKind || len(q["fields"]) == 0 {
		return q
	}
	out := url.Values{}
	for key, v := range q {
		out[key] = v
	}
	out["fields"] = append(slices.Clone(q["fields"]), "tenant_id")
	return out
}
