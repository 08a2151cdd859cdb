# kernelnix's nixpkgs overlay. It adds
#
#   kernelnix                     kernelnix as a Python application (./kernelnix.nix)
#   kernelnixHermetic.glibc       glibc 2.27 (./glibc.nix)
#   kernelnixHermetic.entries.<key>
#                                 per build set of this system (torch213-cu126, ...):
#                                 what a hermetic variant build takes (./entry.nix)
#
# Everything is driven by matrix.json and the wheel lock (./select.nix).
{
  util,
  select,
  glibcNixpkgs,
  pythonSource,
  pyproject,
}:
final: prev:
let
  inherit (select) data;
  system = final.stdenv.hostPlatform.system;
  python =
    final.${data.python.nixpkgs}
      or (throw "kernelnix (hermetic toolchain): nixpkgs has no ${data.python.nixpkgs} (matrix.json: hermetic.python.nixpkgs)");
  glibc = import ./glibc.nix {
    pkgs = final;
    inherit glibcNixpkgs system;
    version = data.glibc;
  };
  kernelnix = import ./kernelnix.nix {
    inherit util python pyproject;
    src = pythonSource;
  };
  kernels = import ./python-wheel.nix {
    pkgs = final;
    inherit python;
    name = "kernels";
    wheel = select.pythonWheel system "kernels";
  };
  entry = import ./entry.nix {
    pkgs = final;
    inherit
      util
      select
      system
      python
      glibc
      kernelnix
      kernels
      ;
  };
in
{
  inherit kernelnix;
  kernelnixHermetic = {
    inherit python kernels;
    glibc = glibc.glibc;
    inherit (glibc) stdenvFor;
    entries = builtins.listToAttrs (
      map (bs: {
        name = select.key bs;
        value = entry bs;
      }) (select.buildSets system)
    );
  };
}
