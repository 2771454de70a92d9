package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// Error is a Neutron API error: an HTTP status and the body Neutron sends,
// {"NeutronError": {"type": TYPE, "message": MESSAGE, "detail": ""}}. Type is the name of the
// Neutron or networking-sfc exception class (PortPairGroupInUse, FlowClassifierNotFound,
// HTTPBadRequest, ...), so clients that match on it keep working.
type Error struct {
	Status  int
	Type    string
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("%s (%d): %s", e.Type, e.Status, e.Message) }

// Is makes errors.Is(err, ErrNotFound) and friends match every Error of that status class.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Type == "" && t.Status == e.Status
}

// Sentinels for errors.Is: they match any Error with the same status.
var (
	// ErrNotFound matches every 404 (a resource or a port that does not exist).
	ErrNotFound = &Error{Status: http.StatusNotFound}
	// ErrInUse matches every 409 (a resource used by another one, or in conflict).
	ErrInUse = &Error{Status: http.StatusConflict}
	// ErrBadRequest matches every 400 (invalid input).
	ErrBadRequest = &Error{Status: http.StatusBadRequest}
)

func notFound(typ, format string, a ...any) *Error {
	return &Error{Status: http.StatusNotFound, Type: typ, Message: fmt.Sprintf(format, a...)}
}

func inUse(typ, format string, a ...any) *Error {
	return &Error{Status: http.StatusConflict, Type: typ, Message: fmt.Sprintf(format, a...)}
}

func badRequest(typ, format string, a ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Type: typ, Message: fmt.Sprintf(format, a...)}
}

// invalidInput is Neutron's message for an attribute that fails validation.
func invalidInput(attr, format string, a ...any) *Error {
	return badRequest("HTTPBadRequest", "Invalid input for %s. Reason: %s.", attr, fmt.Sprintf(format, a...))
}

type errorBody struct {
	NeutronError neutronError `json:"NeutronError"`
}

type neutronError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	Detail  string `json:"detail"`
}

// writeError writes err as a Neutron error body; an error that is not an *Error is a 500
// (type HTTPInternalServerError) that keeps its text.
func writeError(w http.ResponseWriter, err error) {
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{Status: http.StatusInternalServerError, Type: "HTTPInternalServerError",
			Message: "Request Failed: internal server error while processing your request: " + err.Error()}
	}
	writeJSON(w, e.Status, errorBody{neutronError{Type: e.Type, Message: e.Message}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		data = []byte(`{"NeutronError": {"type": "HTTPInternalServerError", "message": "encode response", "detail": ""}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(data)))
	w.WriteHeader(status)
	_, _ = w.Write(data)
}
