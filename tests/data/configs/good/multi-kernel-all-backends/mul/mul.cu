// A corpus file: check-config needs every source of build.toml to exist.
