"""Research tools run from the repository root (`python -m tools.benchmark`, `tools.study`,
`tools.parity`); not part of the installed `electra_tf` package, which never imports them."""
