package bench

import (
	"os"

	"gonum.org/v1/plot/vg/vgimg"
)

// WritePNG writes a drawn canvas to path as PNG: the --plot file of every bench.
func WritePNG(img *vgimg.Canvas, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
