package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

var completionCommand = command{
	name:     "completion",
	synopsis: "completion bash",
	summary:  "print a bash completion script",
	reach:    nothing,
	help: `Prints a bash script that completes stockctl's commands, their flags and
the values of --db and -dialect (file names elsewhere). Load it with

  source <(stockctl completion bash)

or save it as /etc/bash_completion.d/stockctl.
`,
	setup: func(*flag.FlagSet) func([]string) (work, error) {
		return func(args []string) (work, error) {
			if len(args) != 1 || args[0] != "bash" {
				return nil, errors.New("want 'completion bash': bash is the shell it completes for")
			}
			return func(_ context.Context, s *session) error { return bashCompletion(s.out) }, nil
		}
	},
}

// flagNames returns the flags of fs as --name.
func flagNames(fs *flag.FlagSet) []string {
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, "--"+f.Name) })
	return names
}

// bashCompletion writes the completion script, made from the commands'
// own flag sets so that it lists what they parse.
func bashCompletion(w io.Writer) error {
	global := flag.NewFlagSet("stockctl", flag.ContinueOnError)
	newOptions().register(global)
	globals := append(flagNames(global), "--version", "--help")
	var cases strings.Builder
	for _, c := range commands {
		fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
		c.setup(fs)
		own := flagNames(fs)
		if len(own) == 0 {
			continue
		}
		fmt.Fprintf(&cases, "\t\t%s) flags+=\" %s\" ;;\n", c.name, strings.Join(own, " "))
	}
	kinds := "mysql mariadb postgres sqlite"
	_, err := fmt.Fprintf(w, `# bash completion for stockctl: source <(stockctl completion bash)
_stockctl() {
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} cmd= i
	local commands="%s"
	for ((i = 1; i < COMP_CWORD; i++)); do
		case " $commands help " in
		*" ${COMP_WORDS[i]} "*) cmd=${COMP_WORDS[i]}; break ;;
		esac
	done
	case $prev in
	-db|--db|-dialect|--dialect)
		COMPREPLY=($(compgen -W "%s" -- "$cur"))
		return ;;
	esac
	if [[ $cur == -* ]]; then
		local flags="%s"
		case $cmd in
%s		esac
		COMPREPLY=($(compgen -W "$flags" -- "$cur"))
		return
	fi
	case $cmd in
	"") COMPREPLY=($(compgen -W "$commands help" -- "$cur")) ;;
	help) COMPREPLY=($(compgen -W "$commands" -- "$cur")) ;;
	completion) COMPREPLY=($(compgen -W "bash" -- "$cur")) ;;
	esac
}
complete -o default -F _stockctl stockctl
`, strings.Join(commandNames(), " "), kinds, strings.Join(slices.Sorted(slices.Values(globals)), " "), cases.String())
	return err
}
