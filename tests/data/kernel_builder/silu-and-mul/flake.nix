{
  description = "Flake for silu-and-mul kernel";

  inputs = {
    kernel-builder.url = "github:huggingface/kernels";
  };

  outputs =
    {
      self,
      kernel-builder,
    }:
    kernel-builder.lib.genKernelFlakeOutputs {
      inherit self;
      path = ./.;

      # The tests compare against NumPy.
      pythonCheckInputs = pkgs: with pkgs; [ numpy ];

      # Torch 2.13 only: its CPU build and CUDA 12.6.
      torchVersions =
        defaultVersions:
        builtins.filter (
          version:
          version.torchVersion == "2.13" && (version.cpu or false || (version.cudaVersion or "") == "12.6")
        ) defaultVersions;
    };
}
