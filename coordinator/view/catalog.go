package view

import (
	"sync"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	"github.com/joiner-dev/joiner/cloud"
	"github.com/joiner-dev/joiner/cloud/catalog"
)

// Class is an EC2NodeClass as the nodeclass loop resolved it: valid,
// defaulted, its selectors resolved and its instance types listed.
// Published values are read-only.
type Class struct {
	// NodeClass is the defaulted object with its resolved status.
	NodeClass     *awsv1.EC2NodeClass
	Resolved      cloud.Resolved
	InstanceTypes []*catalog.InstanceType
	// Hash is the class's drift hash.
	Hash string
}

// Catalog holds the classes the nodeclass loop last published; the view
// reads them. Safe for concurrent use.
type Catalog struct {
	mu        sync.RWMutex
	classes   map[string]*Class
	published chan struct{}
	once      sync.Once
}

// NewCatalog returns an empty catalog that has not been published yet.
func NewCatalog() *Catalog {
	return &Catalog{classes: map[string]*Class{}, published: make(chan struct{})}
}

// Publish replaces the ready classes (by name). The map is kept: do not
// change it afterwards.
func (c *Catalog) Publish(classes map[string]*Class) {
	c.mu.Lock()
	c.classes = classes
	c.mu.Unlock()
	c.once.Do(func() { close(c.published) })
}

// Classes returns the last published classes (read-only).
func (c *Catalog) Classes() map[string]*Class {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.classes
}

// Class returns one published class, nil when it is not ready.
func (c *Catalog) Class(name string) *Class {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.classes[name]
}

// Published is closed once the first set of classes is published: the
// loops that plan wait for it so they never plan with no classes at all.
func (c *Catalog) Published() <-chan struct{} { return c.published }
