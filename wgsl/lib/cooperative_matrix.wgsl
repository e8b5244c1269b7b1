// Enables for the kernels on cooperative matrices (f16 tiles, f32 accumulators). Enable
// directives must open a module, so this file comes before every other one of such a kernel.
enable f16;
enable wgpu_cooperative_matrix;
