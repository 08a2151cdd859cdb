"""Generated text: Jinja2 templates under `kernelnix/templates/` rendered from the plan.

`render` holds the one Jinja2 environment; `escape` the one function that
turns a build.toml value into CMake text; `cmake` the per-variant CMake project.
"""
