package v1

import "github.com/joiner-dev/joiner/api/internal/register"

var (
	// SchemeBuilder registers this group's types.
	SchemeBuilder = register.Builder(SchemeGroupVersion, &EC2NodeClass{}, &EC2NodeClassList{})
	// AddToScheme adds this group's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
