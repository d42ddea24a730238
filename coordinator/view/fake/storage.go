// Package fake has a hand-written view.Storage for tests.
package fake

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// Storage is a view.Storage over plain slices; the zero value has nothing.
type Storage struct {
	PVCs           []*corev1.PersistentVolumeClaim
	PVs            []*corev1.PersistentVolume
	StorageClasses []*storagev1.StorageClass
	CSINodes       []*storagev1.CSINode
	NamespaceList  []*corev1.Namespace
}

// PersistentVolumeClaim returns the claim namespace/name or nil.
func (s *Storage) PersistentVolumeClaim(namespace, name string) *corev1.PersistentVolumeClaim {
	for _, c := range s.PVCs {
		if c.Namespace == namespace && c.Name == name {
			return c
		}
	}
	return nil
}

// PersistentVolume returns the volume or nil.
func (s *Storage) PersistentVolume(name string) *corev1.PersistentVolume { return Find(s.PVs, name) }

// StorageClass returns the class or nil.
func (s *Storage) StorageClass(name string) *storagev1.StorageClass {
	return Find(s.StorageClasses, name)
}

// CSINode returns the CSINode or nil.
func (s *Storage) CSINode(name string) *storagev1.CSINode { return Find(s.CSINodes, name) }

// Namespaces returns the namespaces sorted by name.
func (s *Storage) Namespaces() []*corev1.Namespace {
	out := slices.Clone(s.NamespaceList)
	slices.SortFunc(out, func(a, b *corev1.Namespace) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Find returns the object of list named name, or the zero T.
func Find[T interface{ GetName() string }](list []T, name string) T {
	var zero T
	for _, o := range list {
		if o.GetName() == name {
			return o
		}
	}
	return zero
}
