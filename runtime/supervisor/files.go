package supervisor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// writeFile writes a file for c (Component.WriteFile, AppendFile): only a path c's config
// names for it (its Spec's Files), so a component that was taken over cannot have the
// supervisor write anywhere else. The file is replaced at once (a temporary file beside it,
// renamed), or data is added at its end.
func (s *Supervisor) writeFile(c *child, path string, data []byte, add bool) {
	if !slices.Contains(s.filesOf(c), path) {
		if !c.refusedFiles[path] {
			c.refusedFiles[path] = true
			s.log.Warn(fmt.Sprintf("%s asked to write %s, which its config does not name; refused", c.start.Name, path))
		}
		return
	}
	var err error
	if add {
		err = appendFile(path, data)
	} else {
		tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
		if err = os.WriteFile(tmp, data, 0o644); err == nil {
			err = os.Rename(tmp, path)
		}
	}
	if err != nil && !c.refusedFiles[path] {
		c.refusedFiles[path] = true // said once; the next success clears it
		s.log.Warn(fmt.Sprintf("writing %s for %s: %v", path, c.start.Name, err))
	} else if err == nil {
		delete(c.refusedFiles, path)
	}
}

// filesOf lists the files c's config names for it to write, as its Spec parsed the config.
func (s *Supervisor) filesOf(c *child) []string {
	if s.opts.Components == nil || c.start.Config == nil || c.start.parsed == nil {
		return nil
	}
	spec, err := s.opts.Components.Lookup(c.start.Binary)
	if err != nil || spec.Files == nil {
		return nil
	}
	return spec.Files(c.start.parsed)
}

func appendFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	return errors.Join(err, f.Close())
}
