package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/experiment"
	"github.com/sfclab/sfclab/plan"
	"github.com/sfclab/sfclab/runtime/vm"
	"github.com/sfclab/sfclab/spec"
)

// The vm runtime's guest images, under `sfclab images ... --runtime vm`.

// vmImageSets are the program sets of the guest images a lab file's VMs boot (one per group
// of VM nodes that need the same programs); no lab file, or a lab without VMs: the image with
// the base programs only.
func vmImageSets(labFile, image, expFile string) ([]vm.ProgramSet, error) {
	if expFile != "" {
		if labFile != "" || image != "" {
			return nil, fmt.Errorf("images build: give one of --experiment, --lab, --image (the experiment's labs choose)")
		}
		return experimentImageSets(expFile)
	}
	if labFile == "" {
		switch image {
		case "", spec.VMImageBusybox:
			return []vm.ProgramSet{{Image: spec.VMImageBusybox}}, nil
		case spec.VMImageDebian:
			return []vm.ProgramSet{{Image: image, Packages: vm.DebianPackages(nil)}}, nil
		}
		return nil, fmt.Errorf("images build --image %s: not one of %s", image, strings.Join(spec.VMImages, ", "))
	}
	if image != "" {
		return nil, fmt.Errorf("images build: give --lab or --image, not both (the lab file's vm: image chooses)")
	}
	lab, err := loadLab(labFile, "", "")
	if err != nil {
		return nil, err
	}
	p, err := plan.Build(lab)
	if err != nil {
		return nil, err
	}
	sets, err := vm.ProgramSets(p)
	if err != nil || len(sets) > 0 {
		return sets, err
	}
	return []vm.ProgramSet{{Image: spec.VMImageBusybox}}, nil
}

// experimentImageSets are the program sets of the guest images an experiment's scenarios
// boot, each once (scenarios that share a lab share its images), in scenario order; an
// experiment without VMs is an error, since nothing would be built for it.
func experimentImageSets(file string) ([]vm.ProgramSet, error) {
	e, err := experiment.Load(file)
	if err != nil {
		return nil, err
	}
	var out []vm.ProgramSet
	seen := map[string]bool{}
	for _, s := range e.Scenarios {
		sets, err := vm.ProgramSets(s.Plan)
		if err != nil {
			return nil, fmt.Errorf("images build --experiment %s: scenario %s: %w", file, s.Name, err)
		}
		for _, set := range sets {
			key := set.Image + "|" + strings.Join(set.Packages, ",") + "|" + strings.Join(set.Programs, ",")
			if !seen[key] {
				seen[key] = true
				out = append(out, set)
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("images build --experiment %s: no scenario's lab has a VM node (the vm runtime, or vm: on a node); nothing to build", file)
	}
	return out, nil
}

func buildVMImage(cmd *cobra.Command, labFile, image, expFile string) error {
	if err := deploy.CheckRoot(); err != nil {
		return err
	}
	sets, err := vmImageSets(labFile, image, expFile)
	if err != nil {
		return err
	}
	b := vm.Builder{Log: func(format string, args ...any) { fmt.Fprintf(cmd.ErrOrStderr(), format+"\n", args...) }}
	for _, set := range sets {
		start := time.Now()
		var im *vm.Image
		if set.Image == spec.VMImageDebian {
			im, err = b.EnsureDebian(cmd.Context(), set.Packages)
		} else {
			im, err = b.Ensure(set.Programs)
		}
		if err != nil {
			return err
		}
		nodes := ""
		if len(set.Nodes) > 0 {
			nodes = ", for " + strings.Join(set.Nodes, " ")
		}
		disk := ""
		if im.Disk() != "" {
			disk = fmt.Sprintf(", root %d MB", im.DiskBytes>>20)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%s (%s, kernel %s, initramfs %d MB%s%s, %s)\n", im.Dir, im.KindName(), im.Kernel, im.Bytes>>20, disk, nodes, time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// listVMImages lists the cached guest images with the running VMs that boot each (IN USE:
// their LAB.NODE; an image in use is never removed as superseded).
func listVMImages(cmd *cobra.Command) error {
	ims, err := vm.Builder{}.List()
	if err != nil {
		return err
	}
	use, err := vm.Builder{}.InUse()
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if len(ims) == 0 {
		fmt.Fprintln(out, "no guest image; deploys of VM nodes build one (or: sfclab images build --runtime vm)")
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tIMAGE\tKERNEL\tCREATED\tSIZE\tIN USE\tCONTENT")
	for _, im := range ims {
		size, content := fmt.Sprintf("initramfs %d MB", im.Bytes>>20), "programs: "+strings.Join(im.Programs, " ")
		if im.Disk() != "" {
			size = fmt.Sprintf("root %d MB", im.DiskBytes>>20)
			content = im.Suite + " packages: " + strings.Join(im.Packages, " ")
		}
		inUse := "-"
		if vms := use[im.Key]; len(vms) > 0 {
			inUse = strings.Join(vms, ",")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", im.Key, im.KindName(), im.Kernel, im.Created.Format(time.DateTime), size, inUse, content)
	}
	return tw.Flush()
}

func removeVMImages(cmd *cobra.Command, keys []string, all bool) error {
	if all {
		keys = []string{"all"}
	}
	if len(keys) == 0 {
		return fmt.Errorf("name the images to remove (sfclab images list --runtime vm) or give --all")
	}
	for _, k := range keys {
		if err := (vm.Builder{}).Remove(k); err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", k)
	}
	return nil
}
