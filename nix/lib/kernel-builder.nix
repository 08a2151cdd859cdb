# kernel-builder's entry points: lib.genKernelFlakeOutputs and its old name
# genFlakeOutputs (deprecated, with a warning). They take kernel-builder's
# arguments, which kernelFlake has, and give kernelFlake's outputs, so a
# kernel-builder flake.nix works with only its input URL changed.
{ kernelFlake }:
let
  supported = ''
    kernel-builder.lib.genKernelFlakeOutputs {
      inherit self;
      path = ./.;
    };
  '';
  # `args ? self`, never `self != null`: comparing would evaluate the flake's
  # own outputs, which are being defined.
  genKernelFlakeOutputs =
    args:
    if args ? self then
      kernelFlake (builtins.removeAttrs args [ "rev" ])
    else if args ? rev then
      throw "kernelnix: the `rev` argument of genKernelFlakeOutputs is deprecated; pass the flake's `self` as follows:\n\n${supported}"
    else
      throw "kernelnix: pass the flake's `self` to genKernelFlakeOutputs as follows:\n\n${supported}";
in
{
  inherit genKernelFlakeOutputs;
  genFlakeOutputs =
    args:
    builtins.trace "kernelnix: warning: lib.genFlakeOutputs is deprecated; call lib.genKernelFlakeOutputs (same arguments)" (
      genKernelFlakeOutputs args
    );
}
