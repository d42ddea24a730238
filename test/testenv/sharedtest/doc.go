// Package sharedtest exercises testenv.Main: one control plane shared by a
// package's tests. It has no code of its own.
package sharedtest
