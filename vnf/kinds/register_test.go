package kinds_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf"
	"github.com/sfclab/sfclab/vnf/firewall"
	"github.com/sfclab/sfclab/vnf/kinds"
)

// TestEveryKindHasParams checks what the decoder relies on: every registered kind (endpoint
// services too) gives a fresh pointer to a struct of its own type, and only function kinds
// are listed for lab files.
func TestEveryKindHasParams(t *testing.T) {
	names := kinds.Names()
	if !slices.IsSorted(names) || slices.Contains(names, spec.EndpointHTTPServer) || len(names) == 0 {
		t.Errorf("Names() = %v: want the function kinds, sorted, without endpoint services", names)
	}
	types := map[reflect.Type]string{}
	for _, name := range append(names, spec.EndpointHTTPServer) {
		a, ok := kinds.Spec().NewParams(name)
		b, _ := kinds.Spec().NewParams(name)
		if !ok || a == nil {
			t.Errorf("kind %s: no params", name)
			continue
		}
		typ := reflect.TypeOf(a)
		if typ.Kind() != reflect.Pointer || typ.Elem().Kind() != reflect.Struct {
			t.Errorf("kind %s: params %v are not a pointer to a struct", name, typ)
			continue
		}
		if reflect.ValueOf(a).Pointer() == reflect.ValueOf(b).Pointer() && typ.Elem().Size() > 0 {
			t.Errorf("kind %s: NewParams returns the same value twice", name)
		}
		if other, dup := types[typ]; dup {
			t.Errorf("kinds %s and %s share the params type %v", name, other, typ)
		}
		types[typ] = name
	}
	if _, ok := kinds.Spec().NewParams("nope"); ok {
		t.Error("NewParams of an unknown kind succeeded")
	}
	if _, err := kinds.Get("nope"); !errors.Is(err, vnf.ErrUnknownKind) {
		t.Errorf("Get unknown kind: %v, want ErrUnknownKind", err)
	}
}

type extraKind struct{}

func (extraKind) NewParams() any                          { return &struct{}{} }
func (extraKind) Requires(*plan.Function) []string        { return nil }
func (extraKind) Setup(context.Context, vnf.Env) error    { return nil }
func (extraKind) Teardown(context.Context, vnf.Env) error { return nil }

// TestWithExtra registers a kind for a while: listed and found until removed; a taken name
// panics.
func TestWithExtra(t *testing.T) {
	remove := kinds.WithExtra("zz-extra", extraKind{})
	if _, err := kinds.Get("zz-extra"); err != nil || !slices.Contains(kinds.Names(), "zz-extra") {
		t.Errorf("registered kind not found: %v, %v", err, kinds.Names())
	}
	remove()
	if _, err := kinds.Get("zz-extra"); err == nil || slices.Contains(kinds.Names(), "zz-extra") {
		t.Error("removed kind still found")
	}
	defer func() {
		if recover() == nil {
			t.Error("WithExtra of a taken name did not panic")
		}
	}()
	kinds.WithExtra(firewall.Kind, extraKind{})
}
