package plan

import "github.com/sfclab/sfclab/spec"

// planVM is a node's machine as the plan keeps it: the lab file's vm: settings and where
// they are written (for the vm runtime's refusals).
func planVM(lab *spec.Lab, vm *spec.VM) *VM {
	return &VM{CPUs: vm.CPUs, Memory: vm.Memory, Pin: vm.Pin, NIC: vm.NIC, Image: vm.Image, Backend: vm.Backend,
		Where: (&spec.Error{File: lab.File, Pos: vm.Pos}).Where()}
}
