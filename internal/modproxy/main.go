// Command modproxy publishes this repository's modules, as they are at one
// commit, into a directory laid out as a Go module proxy (GOPROXY=file://…):
// for each module <path>/@v/list and the version's .info, .mod and .zip.
// A consumer that points GOPROXY at the directory then fetches the modules
// exactly as it would fetch their tags, without the workspace (go.work) that
// joins them in the repository.
//
// Usage:
//
//	modproxy -out DIR [-rev REV] [-versions FILE]
//	modproxy -out DIR -rev REV -module DIR -version VERSION
//
// The first form reads FILE (default .ci/versions): each line names a
// module's directory and the version its next tag carries, or "-" for a
// module that is never published. Before writing anything it checks, at
// REV, that every go.mod is listed, that no go.mod has a replace directive,
// and that every requirement of one of the repository's modules names that
// module's listed version. It then publishes every listed module at REV.
// The second form publishes one module at REV under VERSION, without those
// checks: an earlier commit as a baseline to compare the API against.
//
// Publishing adds to what DIR already holds. It must run at the top of a git
// work tree; the zips are made with golang.org/x/mod/zip from the files git
// holds at REV, as the go command makes them from a tag.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	out := flag.String("out", "", "the proxy `directory` to write (created when missing)")
	rev := flag.String("rev", "HEAD", "the git `revision` to publish")
	versions := flag.String("versions", ".ci/versions", "the `file` listing each module's directory and version")
	dir := flag.String("module", "", "publish only the module in this `directory`, without checks")
	version := flag.String("version", "", "the `version` to publish -module under")
	flag.Parse()
	if err := run(*out, *rev, *versions, *dir, *version); err != nil {
		fmt.Fprintln(os.Stderr, "modproxy:", err)
		os.Exit(1)
	}
}

func run(out, rev, versionsFile, dir, version string) error {
	if out == "" || flag.NArg() > 0 {
		return fmt.Errorf("usage: modproxy -out DIR [-rev REV] [-versions FILE | -module DIR -version VERSION]")
	}
	repo, err := openRepo(rev)
	if err != nil {
		return err
	}
	if dir != "" {
		if version == "" {
			return fmt.Errorf("-module needs -version")
		}
		return repo.publish(out, release{Dir: dir, Version: version})
	}
	text, err := os.ReadFile(versionsFile)
	if err != nil {
		return err
	}
	releases, err := parseVersions(string(text))
	if err != nil {
		return fmt.Errorf("%s: %w", versionsFile, err)
	}
	if err := repo.check(releases); err != nil {
		return err
	}
	for _, r := range releases {
		if r.Version == "" {
			continue
		}
		if err := repo.publish(out, r); err != nil {
			return err
		}
	}
	return nil
}
