package cli

import (
	"fmt"
	"io"
	"strings"
)

// Shell completion. Each script asks the binary for the candidates of the
// word being completed (`kvwatch --completion-bash WORDS...`, answered by
// kingpin from the same flag definitions as --help), so the scripts never
// go stale and stay the same for every version. Scripts are printed by
// `kvwatch --completion-script-SHELL`; docs/installation.md says how to
// load them, and the .deb installs them.

// completionScripts are the scripts per shell.
var completionScripts = map[string]string{
	"bash": `# bash completion for kvwatch: source <(kvwatch --completion-script-bash)
_kvwatch_complete() {
    local cur="${COMP_WORDS[COMP_CWORD]}" IFS=$'\n'
    local words
    words="$("${COMP_WORDS[0]}" --completion-bash "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null)"
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -o default -F _kvwatch_complete kvwatch
`,
	"zsh": `#compdef kvwatch
# zsh completion for kvwatch: source <(kvwatch --completion-script-zsh) after
# compinit, or save it as _kvwatch in a directory of $fpath.
_kvwatch() {
    local -a candidates
    candidates=(${(f)"$(${words[1]} --completion-bash "${(@)words[2,$CURRENT]}" 2>/dev/null)"})
    if (( ${#candidates} )); then
        compadd -a candidates
    elif [[ $words[$CURRENT] != -* ]]; then
        _files
    fi
}
if [[ $zsh_eval_context[-1] == loadautofunc ]]; then
    _kvwatch "$@"
else
    compdef _kvwatch kvwatch
fi
`,
	"fish": `# fish completion for kvwatch: kvwatch --completion-script-fish | source
function __kvwatch_complete
    set -l words (commandline -opc)
    set -l current (commandline -ct)
    $words[1] --completion-bash $words[2..-1] "$current" 2>/dev/null
end
complete -c kvwatch -f -a '(__kvwatch_complete)'
`,
}

// completionShells are the shells with a script, in the order docs list them.
var completionShells = []string{"bash", "zsh", "fish"}

// writeCompletionScript prints the script of shell, or a usage error.
func writeCompletionScript(s Streams, shell string) int {
	script, ok := completionScripts[shell]
	if !ok {
		fmt.Fprintf(s.Stderr, "kvwatch: no completion script for %q; use --completion-script-%s\n", shell, strings.Join(completionShells, ", --completion-script-"))
		return exitUsage
	}
	io.WriteString(s.Stdout, script)
	return exitOK
}
