// Command nicstack-cni is the CNI plugin of nicstack: a container runtime runs it to attach a
// pod's network namespace to a nicstack run as a guest of its router (internal/cni).
package main

import "github.com/nicstack/nicstack/internal/cni"

func main() { cni.Main() }
