# kernel-builder's entry points: lib.genKernelFlakeOutputs and its old name
# genFlakeOutputs (deprecated, with a warning), and the legacy `rev`
# argument in place of `self` (deprecated, with a warning). They take kernel-builder's
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
    else if args ? rev && args ? path then
      # The legacy huggingface/kernel-builder's form: `rev` names the build
      # (the op namespace); it only warned, so kernelnix does too.
      builtins.trace
        "kernelnix: warning: the `rev` argument of genKernelFlakeOutputs is deprecated; pass the flake's `self` instead of `rev`:\n\n${supported}"
        (
          kernelFlake (
            builtins.removeAttrs args [ "rev" ]
            // {
              self = {
                outPath = args.path;
                shortRev = args.rev;
              };
            }
          )
        )
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
