package v1

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ErrInvalid is matched by errors.Is for every validation error of the
// Karpenter-compatible API types (core and AWS): callers tell bad input from
// other failures with errors.Is(err, v1.ErrInvalid).
var ErrInvalid = errors.New("invalid object")

// FieldError is one problem with one field: the field path and what is wrong
// with the value, e.g. `spec.weight: must be between 1 and 100, got 0`.
//
// +kubebuilder:object:generate=false
type FieldError struct {
	// Field is the path of the field, e.g. spec.template.spec.requirements[1].values.
	Field string
	// Detail says what is wrong, naming the bad value.
	Detail string
}

// Error returns "field: detail".
func (e FieldError) Error() string { return e.Field + ": " + e.Detail }

// ValidationError holds every problem found in an object, in the order the
// fields were checked. Error() returns one problem per line.
//
// +kubebuilder:object:generate=false
type ValidationError struct {
	Errors []FieldError
}

// Error returns the problems, one per line.
func (e *ValidationError) Error() string {
	lines := make([]string, len(e.Errors))
	for i, fe := range e.Errors {
		lines[i] = fe.Error()
	}
	return strings.Join(lines, "\n")
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

// Add records a problem with field; the detail is formatted like fmt.Sprintf.
func (e *ValidationError) Add(field, format string, args ...any) {
	e.Errors = append(e.Errors, FieldError{Field: field, Detail: fmt.Sprintf(format, args...)})
}

// Merge appends the problems of err (a *ValidationError) to e; any other
// non-nil error is recorded under field.
func (e *ValidationError) Merge(field string, err error) {
	if err == nil {
		return
	}
	var ve *ValidationError
	if errors.As(err, &ve) {
		e.Errors = append(e.Errors, ve.Errors...)
		return
	}
	e.Add(field, "%v", err)
}

// OrNil returns e when it holds problems and nil otherwise.
func (e *ValidationError) OrNil() error {
	if e == nil || len(e.Errors) == 0 {
		return nil
	}
	return e
}

// FieldErrors returns the problems carried by err, or nil when err is not a
// validation error.
func FieldErrors(err error) []FieldError {
	var ve *ValidationError
	if errors.As(err, &ve) {
		return ve.Errors
	}
	return nil
}

// Quote renders a value for an error message: strings quoted, lists and maps
// as JSON, so the bad value is unambiguous.
func Quote(v any) string {
	switch x := v.(type) {
	case string:
		return fmt.Sprintf("%q", x)
	case fmt.Stringer:
		return fmt.Sprintf("%q", x.String())
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(b)
}

// Index returns path[i].
func Index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

// Key returns path[key], the form Kubernetes uses for map entries.
func Key(path, key string) string { return path + "[" + key + "]" }
