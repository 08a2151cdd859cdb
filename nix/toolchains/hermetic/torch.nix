# Torch of one build set: the official wheel (a fixed-output download, URL
# and hash from the wheel lock) made a Nix Python package. autoPatchelf links
# its libraries against Nix store paths: the CUDA libraries of the build set's
# cudaPackages replace the wheel's nvidia-* / cuda-toolkit pip requirements;
# ROCm wheels keep the ROCm libraries they bundle. The driver (libcuda.so.1)
# comes from the machine that runs the kernel, never from the build: it is
# found through the driver runpath nixpkgs' autoAddDriverRunpath adds.
{
  pkgs,
  python,
  backend,
  toolkit,
  wheel,
}:
let
  # Present in the build set's cudaPackages, in the outputs that hold the
  # shared libraries (`lib` where the package splits them off).
  cudaLibraryNames = [
    "cuda_cudart"
    "cuda_cupti"
    "cuda_nvrtc"
    "cudnn"
    "libcublas"
    "libcufft"
    "libcufile"
    "libcurand"
    "libcusolver"
    "libcusparse"
    "libcusparse_lt"
    "libnvjitlink"
    "libnvshmem"
    "nccl"
  ];
  libraryOutput = p: if builtins.elem "lib" (p.outputs or [ ]) then p.lib else p;
  present = set: names: map (n: set.${n}) (builtins.filter (n: set ? ${n}) names);
  backendLibraries =
    if backend == "cuda" then
      map libraryOutput (present toolkit cudaLibraryNames)
    else if backend == "rocm" then
      # What the libraries bundled in the ROCm wheel link from the system.
      present pkgs [
        "zlib"
        "bzip2"
        "libdrm"
        "numactl"
        "elfutils"
        "ncurses"
      ]
    else
      [ ];
  pythonDependencies = present python.pkgs [
    "filelock"
    "fsspec"
    "jinja2"
    "networkx"
    "numpy"
    "setuptools"
    "sympy"
    "typing-extensions"
  ];
in
python.pkgs.buildPythonPackage {
  pname = "torch";
  inherit (wheel) version;
  format = "wheel";
  src = import ./fetch-wheel.nix { inherit (pkgs) fetchurl; } wheel;
  # CUDA: the driver's directory (/run/opengl-driver/lib on NixOS) in every
  # library's RUNPATH, where Torch dlopens libcuda.so.1 from at run time.
  nativeBuildInputs = [
    pkgs.autoPatchelfHook
  ]
  ++ (if backend == "cuda" then [ pkgs.autoAddDriverRunpath ] else [ ]);
  buildInputs = [ (libraryOutput pkgs.stdenv.cc.cc) ] ++ backendLibraries;
  dependencies = pythonDependencies;
  # The wheel's requirements on nvidia-*, cuda-toolkit, cuda-bindings,
  # triton and the like are pip packages Nix replaces (or Torch does not need
  # to be imported): autoPatchelf above links the libraries instead.
  dontCheckRuntimeDeps = true;
  autoPatchelfIgnoreMissingDeps = [ "libcuda.so.1" ];
  dontStrip = true;
  pythonImportsCheck = [ "torch" ];
  passthru = {
    inherit backend toolkit;
    wheelUrl = wheel.url;
  };
}
