package convert

import (
	"errors"
	"fmt"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// ValidateObject defaults a copy of a converted v1 object (*karpv1.NodePool
// or *awsv1.EC2NodeClass), as the API server would on create, and validates
// it. It returns one error per invalid field, each naming the field path.
func ValidateObject(obj any) []error {
	var err error
	switch o := obj.(type) {
	case *karpv1.NodePool:
		cp := o.DeepCopy()
		cp.SetDefaults()
		err = cp.Validate()
	case *awsv1.EC2NodeClass:
		cp := o.DeepCopy()
		cp.SetDefaults()
		err = cp.Validate()
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

// Validate validates every converted object of objs; each error names the
// object, its source document and the field.
func Validate(objs []Object) []error {
	var errs []error
	for _, o := range objs {
		var obj any
		var what string
		switch {
		case o.NodePool != nil:
			obj, what = o.NodePool, "NodePool "+o.NodePool.Name
		case o.EC2NodeClass != nil:
			obj, what = o.EC2NodeClass, "EC2NodeClass "+o.EC2NodeClass.Name
		default:
			continue
		}
		for _, err := range ValidateObject(obj) {
			errs = append(errs, fmt.Errorf("%s from %s: %w", what, o.Source, err))
		}
	}
	return errs
}
