package convert

import (
	"errors"
	"fmt"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// ValidateObject defaults a copy of a converted v1 object (*karpv1.NodePool,
// *awsv1.EC2NodeClass or *karpv1.NodeClaim), as the API server would on
// create, and validates it. It returns one error per invalid field, each
// naming the field path.
func ValidateObject(obj any) []error {
	var err error
	switch o := obj.(type) {
	case *karpv1.NodePool:
		err = defaultedValid(o)
	case *awsv1.EC2NodeClass:
		err = defaultedValid(o)
	case *karpv1.NodeClaim:
		err = defaultedValid(o)
	default:
		return []error{fmt.Errorf("cannot validate %T", obj)}
	}
	if err == nil {
		return nil
	}
	var ve *karpv1.ValidationError
	if errors.As(err, &ve) && len(ve.Errors) > 0 {
		errs := make([]error, len(ve.Errors))
		for i, fe := range ve.Errors {
			errs[i] = fe
		}
		return errs
	}
	return []error{err}
}

// defaultedValid validates a defaulted copy of o.
func defaultedValid[T any, P interface {
	*T
	DeepCopy() P
	SetDefaults()
	Validate() error
}](o P) error {
	cp := o.DeepCopy()
	cp.SetDefaults()
	return cp.Validate()
}

// eachInvalid calls bad for each invalid field of the converted objects of
// objs.
func eachInvalid(objs []Object, bad func(o Object, kind, name string, err error)) {
	for _, o := range objs {
		obj, kind, name := o.converted()
		if obj == nil {
			continue
		}
		for _, err := range ValidateObject(obj) {
			bad(o, kind, name, err)
		}
	}
}

// Validate validates every converted object of objs; each error names the
// object, its source document and the field.
func Validate(objs []Object) []error {
	var errs []error
	eachInvalid(objs, func(o Object, kind, name string, err error) {
		errs = append(errs, fmt.Errorf("%s %s from %s: %w", kind, name, o.Source, err))
	})
	return errs
}

// ValidateAll validates every converted object of objs. It returns the
// objects of the documents whose converted objects are all valid, and one
// *DocumentError per invalid field (errors.Is karpv1.ErrInvalid), naming the
// document, the converted object and the field.
func ValidateAll(objs []Object) ([]Object, []error) {
	failed := map[string]bool{}
	var errs []error
	eachInvalid(objs, func(o Object, kind, name string, err error) {
		errs = append(errs, o.fail(&invalidError{what: "converted " + kind + " " + name, err: err}))
		failed[o.Source] = true
	})
	var valid []Object
	for _, o := range objs {
		if !failed[o.Source] {
			valid = append(valid, o)
		}
	}
	return valid, errs
}

// invalidError is a field of a converted object that v1 rejects.
type invalidError struct {
	what string // "converted EC2NodeClass default"
	err  error
}

func (e *invalidError) Error() string { return e.what + ": " + e.err.Error() }

func (e *invalidError) Unwrap() error { return e.err }

func (e *invalidError) Is(target error) bool { return target == karpv1.ErrInvalid }
