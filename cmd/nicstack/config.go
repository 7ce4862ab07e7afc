package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/nicstack/nicstack/runtime/config"
)

func init() {
	cfg := &cobra.Command{
		Use:   "config",
		Short: "Work with configs in Genode's config language (XML or HID)",
	}
	var to string
	convert := &cobra.Command{
		Use:   "convert FILE",
		Short: "Print a config in the other syntax (XML to HID, HID to XML; FILE - is stdin)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return convertConfig(cmd.OutOrStdout(), cmd.ErrOrStderr(), cmd.InOrStdin(), args[0], to)
		},
	}
	convert.Flags().StringVar(&to, "to", "", "output syntax, xml or hid (default: the other one)")
	cfg.AddCommand(convert)
	root.AddCommand(cfg)
}

// convertConfig parses file strictly and writes it to out in the syntax to. Each error goes to
// errOut as FILE:LINE:COL: message; the returned error only says that there were some.
func convertConfig(out, errOut io.Writer, in io.Reader, file, to string) error {
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	data, err := io.ReadAll(io.LimitReader(in, config.MaxSize+1)) // Parse refuses anything larger
	if err != nil {
		return err
	}
	target := config.HID
	switch to {
	case "xml":
		target = config.XML
	case "hid":
	case "":
		if config.DetectSyntax(data) == config.HID {
			target = config.XML
		}
	default:
		return fmt.Errorf("--to must be xml or hid, not %q", to)
	}
	n, err := config.Parse(file, data)
	if err == nil && target == config.HID {
		err = n.CheckHID()
	}
	if err != nil {
		var list config.ErrorList
		if !errors.As(err, &list) {
			return err
		}
		for _, e := range list {
			fmt.Fprintln(errOut, e)
		}
		return fmt.Errorf("%s: %d error(s), nothing converted", file, len(list))
	}
	if target == config.XML {
		_, err = out.Write(n.XML())
	} else {
		_, err = out.Write(n.HID())
	}
	return err
}
