# What a hermetic variant build of one build set takes: its own Torch, its
# own toolkit (nixpkgs' cudaPackages_X_Y / ROCm / XPU set, named by
# matrix.json), a C/C++ compiler on glibc 2.27, and a Python with Torch,
# kernelnix and the `kernels` loader. `env` is the environment of the shared
# variant derivation (nix/lib/variant.nix): every path in it is a store path.
{
  pkgs,
  util,
  select,
  system,
  python,
  glibc,
  kernelnix,
  kernels,
}:
bs:
let
  inherit (select) data;
  inherit (bs) backend;
  key = select.key bs;

  # The toolkit's package set: the first name of matrix.json's list nixpkgs
  # has, checked against the build set's version.
  toolkit =
    if backend == "cpu" then
      null
    else
      let
        spec =
          data.toolkits.${backend}
            or (throw "kernelnix (hermetic toolchain): matrix.json has no hermetic.toolkits.${backend} for ${key}");
        names = map (t: select.fill t bs.version) spec.nixpkgs;
        found = util.findFirst (name: pkgs ? ${name}) names;
        set = pkgs.${found};
        provided = util.attrByPath spec.version null set;
        components = builtins.length (builtins.splitVersion bs.version);
        overlayHint = "give kernelFlake an overlay that provides ${builtins.head names} (kernelFlake { overlays = [ ... ]; }), or leave this variant out";
      in
      if found == null then
        throw "kernelnix (hermetic toolchain): ${key} needs ${backend} ${bs.version}, and nixpkgs has none of ${builtins.concatStringsSep ", " names}; ${overlayHint}"
      else if provided != null && select.truncate components provided != bs.version then
        throw "kernelnix (hermetic toolchain): ${key} needs ${backend} ${bs.version}, and nixpkgs' ${found} is ${provided}; ${overlayHint}"
      else
        set;

  # nvcc accepts only some gcc versions: CUDA builds use the one nixpkgs
  # pairs with the toolkit (backendStdenv); the others matrix.json's compiler.
  gcc =
    if backend == "cuda" then
      toolkit.backendStdenv.cc.cc
    else
      (pkgs.${data.compiler}
        or (throw "kernelnix (hermetic toolchain): nixpkgs has no ${data.compiler} (matrix.json: hermetic.compiler)")
      ).cc;
  stdenv = glibc.stdenvFor gcc;
  cc = stdenv.cc;
  salt = cc.suffixSalt;

  torch = import ./torch.nix {
    inherit
      pkgs
      python
      backend
      toolkit
      ;
    wheel = select.torchWheel system bs;
  };
  # The Python of the build, the scripts and the shells; `extra` adds a kernel
  # flake's pythonCheckInputs (`ps: [ ps.einops ]`) for ci-test and the shells.
  pythonEnvWith =
    extra:
    python.withPackages (
      ps:
      [
        torch
        (ps.toPythonModule kernelnix)
        kernels
        ps.pytest
      ]
      ++ extra ps
    );
  pythonEnv = pythonEnvWith (ps: [ ]);

  binOutput = p: if builtins.elem "bin" (p.outputs or [ ]) then p.bin else p;
  binPath = packages: builtins.concatStringsSep ":" (map (p: "${binOutput p}/bin") packages);

  cudaToolkit = toolkit.cudatoolkit or (throw "kernelnix (hermetic toolchain): ${key}: the CUDA package set has no cudatoolkit");
  rocmRoot = toolkit.clr or (throw "kernelnix (hermetic toolchain): ${key}: the ROCm package set has no clr");
  rocmPackage =
    name:
    toolkit.${name}
      or (throw "kernelnix (hermetic toolchain): ${key}: the ROCm package set has no ${name}, whose headers ATen's HIP headers include");
  # The HIP compiler: ROCm's clang, wrapped again for glibc 2.27 (binutils,
  # C library and libstdc++ of this build set's compiler), like CC and CXX.
  hipCc = glibc.wrapWith {
    cc = (rocmPackage "llvm").clang.cc;
    gccForLibs = cc.cc;
  };
  # What ATen's HIP headers include besides HIP itself; hipSPARSELt where
  # nixpkgs has it (ATen includes it only when Torch was built with it).
  hipHeaders =
    map rocmPackage [
      "rocprim"
      "hipcub"
      "rocthrust"
      "rocwmma"
    ]
    ++ (if toolkit ? hipsparselt then [ toolkit.hipsparselt ] else [ ]);
  backendTools =
    if backend == "cuda" then
      [ cudaToolkit ]
    else if backend == "rocm" then
      [ rocmRoot ]
    else if backend == "xpu" then
      [ (toolkit.oneapi-torch-dev or toolkit) ]
    else
      [ ];
  backendEnv =
    if backend == "cuda" then
      {
        CUDAToolkit_ROOT = cudaToolkit;
        CUDA_HOME = cudaToolkit;
        CUDAHOSTCXX = "${cc}/bin/c++";
      }
    else if backend == "rocm" then
      {
        ROCM_PATH = rocmRoot;
        HIP_PATH = rocmRoot;
        # CMake's HIP compiler, and include directories kernelnix.cmake adds.
        HIPCXX = "${hipCc}/bin/clang++";
        "NIX_CC_WRAPPER_TARGET_HOST_${hipCc.suffixSalt}" = "1";
        KERNELNIX_HIP_INCLUDE = builtins.concatStringsSep ";" (map (p: "${p}/include") hipHeaders);
      }
    else
      { };

  tools = [
    cc
    cc.bintools
    pkgs.cmake
    pkgs.ninja
    pkgs.coreutils
    pkgs.findutils
    pkgs.gnugrep
    pkgs.gnused
    pkgs.gawk
  ] ++ backendTools;
in
{
  inherit
    key
    backend
    toolkit
    stdenv
    cc
    torch
    python
    pythonEnv
    pythonEnvWith
    kernelnix
    kernels
    ;
  buildSet = bs;
  glibc = glibc.glibc;
  shell = "${pkgs.bash}/bin/bash";
  path = binPath tools;
  # The variant derivation's environment (besides the shared attributes).
  env = {
    KERNELNIX_PYTHON = "${pythonEnv}/bin/python3";
    PATH = binPath tools;
    CC = "${cc}/bin/cc";
    CXX = "${cc}/bin/c++";
    # The wrappers honour these outside stdenv too; no RPATH into the store
    # (the checks allow only $ORIGIN-relative ones).
    "NIX_CC_WRAPPER_TARGET_HOST_${salt}" = "1";
    "NIX_BINTOOLS_WRAPPER_TARGET_HOST_${salt}" = "1";
    NIX_DONT_SET_RPATH = "1";
    SOURCE_DATE_EPOCH = "315532800";
  } // backendEnv;
}
