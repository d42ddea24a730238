package convert

import (
	"fmt"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// validator is what the v1 types implement (api/core/v1, api/aws/v1).
type validator interface{ Validate() error }

// defaulter applies the CRD defaults Kubernetes would apply on create.
type defaulter interface{ SetDefaults() }

// ValidateObject defaults a copy of a v1 object (as the API server would on
// create) and validates it; it returns the validation errors, if any.
func ValidateObject(obj any) []error {
	var cp any
	switch o := obj.(type) {
	case *karpv1NodePool:
		cp = o.DeepCopy()
	case *awsv1EC2NodeClass:
		cp = o.DeepCopy()
	default:
		return []error{fmt.Errorf("unexpected object %T", obj)}
	}
	if d, ok := cp.(defaulter); ok {
		d.SetDefaults()
	}
	v, ok := cp.(validator)
	if !ok {
		return nil
	}
	if err := v.Validate(); err != nil {
		return []error{err}
	}
	return nil
}

// Validate validates every converted object of objs; each error names the
// object's source document.
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

type (
	karpv1NodePool    = karpv1.NodePool
	awsv1EC2NodeClass = awsv1.EC2NodeClass
)
