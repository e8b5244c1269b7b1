//! The Gated DeltaNet: causal conv, gates, the delta rule (token by token; by chunks in
//! delta_chunks.rs).

use super::*;

impl Wgpu {
    /// Causal depthwise conv (`w`: one row of taps per channel, oldest first) over the carried
    /// inputs in `state` (taps−1 rows) followed by x, then SiLU; `state` keeps the last rows.
    pub fn conv1d_silu(
        &self,
        x: &GpuTensor,
        w: &GpuTensor,
        state: &GpuTensor,
    ) -> Result<GpuTensor, GpuError> {
        let (taps, channels) = (w.cols, x.cols);
        if taps == 0 || w.rows != channels || state.dims() != (taps - 1, channels) {
            return Err(shape_error(
                "conv1d_silu",
                format!(
                    "x {}×{channels}, w {}×{taps}, state {}×{}",
                    x.rows, w.rows, state.rows, state.cols
                ),
            ));
        }
        let out = self.output(x.rows, channels)?;
        self.record(
            Kernel::Conv1dSilu,
            &[channels as u32, taps as u32, x.rows as u32, 0],
            &[&x.buffer, &w.buffer, &state.buffer, &out.buffer],
            channels.div_ceil(WG),
            f32_bytes(&[x, w, state]),
        )?;
        Ok(out)
    }

    /// `(g, β) = (ssm_a · softplus(alpha + dt_bias), sigmoid(beta))`, elementwise per head.
    pub fn delta_net_gates(
        &self,
        alpha: &GpuTensor,
        beta: &GpuTensor,
        ssm_a: &GpuTensor,
        dt_bias: &GpuTensor,
    ) -> Result<(GpuTensor, GpuTensor), GpuError> {
        let op = "delta_net_gates";
        same_dims(op, alpha, beta)?;
        one_row(op, ssm_a)?;
        same_dims(op, ssm_a, dt_bias)?;
        whole_groups(op, alpha, ssm_a.cols)?;
        let g = self.output(alpha.rows, alpha.cols)?;
        let beta_out = self.output(beta.rows, beta.cols)?;
        let n = alpha.len();
        self.record(
            Kernel::DeltaNetGates,
            &[n as u32, ssm_a.cols as u32],
            &[
                &alpha.buffer,
                &beta.buffer,
                &ssm_a.buffer,
                &dt_bias.buffer,
                &g.buffer,
                &beta_out.buffer,
            ],
            n.div_ceil(WG),
            f32_bytes(&[alpha, beta, ssm_a, dt_bias]),
        )?;
        Ok((g, beta_out))
    }

    /// Causal depthwise conv + SiLU of m (see [`Wgpu::conv1d_silu`]), split into q | k | v, q and
    /// k L2-normalised per head (`x · scale / sqrt(Σx² + eps)`), q scaled by `q_scale`.
    pub fn conv_qkv_norm(
        &self,
        op: &ConvQkvNorm<'_, GpuTensor>,
        state: &GpuTensor,
    ) -> Result<Qkv<GpuTensor>, GpuError> {
        let (m, w, shape, q_scale, eps) = (op.m, op.w, op.shape, op.q_scale, op.eps);
        let DeltaNetShape {
            n_k_head,
            n_v_head,
            k_dim,
            v_dim,
        } = shape;
        let (taps, key_width, value_width) = (w.cols, n_k_head * k_dim, n_v_head * v_dim);
        let channels = 2 * key_width + value_width;
        let widest = CONV_QKV_CHANNELS_PER_INVOCATION * WG;
        let fits = taps > 0
            && n_k_head > 0
            && n_v_head > 0
            && (1..=widest).contains(&k_dim)
            && (1..=widest).contains(&v_dim)
            && m.cols == channels
            && w.rows == channels
            && state.dims() == (taps - 1, channels);
        if !fits {
            return Err(shape_error(
                "conv_qkv_norm",
                format!(
                    "m {}×{}, w {}×{taps}, state {}×{} for {n_k_head}×{k_dim} key and \
                     {n_v_head}×{v_dim} value channels (heads at most {widest} wide)",
                    m.rows, m.cols, w.rows, state.rows, state.cols
                ),
            ));
        }
        let q = self.output(m.rows, key_width)?;
        let k = self.output(m.rows, key_width)?;
        let v = self.output(m.rows, value_width)?;
        let heads = 2 * n_k_head + n_v_head;
        // Enough workgroups to fill a large GPU on a long prompt, each still long enough to
        // amortise its L2 reductions' barriers; never fewer rows than the carried ones (the
        // kernel's first block alone reads and shifts the conv state).
        let rows_per_group = CONV_QKV_ROWS_PER_GROUP.max(taps - 1);
        self.record(
            Kernel::ConvQkvNorm,
            &[
                n_k_head as u32,
                k_dim as u32,
                n_v_head as u32,
                v_dim as u32,
                taps as u32,
                m.rows as u32,
                q_scale.to_bits(),
                eps.to_bits(),
                rows_per_group as u32,
            ],
            &[
                &m.buffer,
                &w.buffer,
                &state.buffer,
                &q.buffer,
                &k.buffer,
                &v.buffer,
            ],
            heads * m.rows.div_ceil(rows_per_group).max(1),
            f32_bytes(&[m, w, state]),
        )?;
        Ok(Qkv { q, k, v })
    }

    /// The gated delta rule token by token over the rows, per value head, on the f32 `state`
    /// (one row of k_dim × v_dim per value head, key index major); returns o.
    pub fn delta_rule(
        &self,
        op: &DeltaRule<'_, GpuTensor>,
        state: &GpuTensor,
    ) -> Result<GpuTensor, GpuError> {
        let gates = DeltaRuleGates::Computed {
            g: op.g,
            beta: op.beta,
        };
        self.delta_rule_kernel(op.qkv, gates, state, op.shape)
    }

    /// [`Wgpu::delta_rule`] with its gates computed from the projections as
    /// [`Wgpu::delta_net_gates`] does, in the same dispatch.
    pub fn gated_delta_rule(
        &self,
        rule: &GatedDeltaRule<'_, GpuTensor>,
        state: &GpuTensor,
    ) -> Result<GpuTensor, GpuError> {
        let GatedDeltaRule {
            qkv,
            alpha,
            beta,
            ssm_a,
            dt_bias,
            shape,
        } = *rule;
        let op = "gated_delta_rule";
        one_row(op, ssm_a)?;
        same_dims(op, ssm_a, dt_bias)?;
        if ssm_a.cols != shape.n_v_head {
            return Err(shape_error(
                op,
                format!(
                    "{} gate heads for {} value heads",
                    ssm_a.cols, shape.n_v_head
                ),
            ));
        }
        let gates = DeltaRuleGates::Raw {
            alpha,
            beta,
            ssm_a,
            dt_bias,
        };
        self.delta_rule_kernel(qkv, gates, state, shape)
    }

    fn delta_rule_kernel(
        &self,
        qkv: &Qkv<GpuTensor>,
        gates: DeltaRuleGates<'_, GpuTensor>,
        state: &GpuTensor,
        shape: DeltaNetShape,
    ) -> Result<GpuTensor, GpuError> {
        let Qkv { q, k, v } = qkv;
        let DeltaNetShape {
            n_k_head,
            n_v_head,
            k_dim,
            v_dim,
        } = shape;
        let ([gate, strength], gate_params, raw) = gates.operands();
        let n = q.rows;
        checks::delta_rule(qkv, [gate, strength], state, shape, GpuTensor::dims)
            .map_err(|d| shape_error("delta_rule", d))?;
        if k_dim > MAX_K_DIM {
            return Err(shape_error(
                "delta_rule",
                format!("k_dim {k_dim}: the kernel holds at most {MAX_K_DIM}"),
            ));
        }
        let scan = self.delta_rule_scan && k_dim <= DELTA_RULE_SCAN_MAX_K_DIM;
        if n >= DELTA_RULE_PREFILL_MIN_ROWS && !scan {
            // The chunked kernel takes the gates computed (one more dispatch, once a prefill).
            if raw {
                let (g, beta) =
                    self.delta_net_gates(gate, strength, gate_params[0], gate_params[1])?;
                let op = DeltaRule {
                    qkv,
                    g: &g,
                    beta: &beta,
                    shape,
                };
                return self.delta_rule_chunked(&op, state);
            }
            let op = DeltaRule {
                qkv,
                g: gate,
                beta: strength,
                shape,
            };
            return self.delta_rule_chunked(&op, state);
        }
        let out = self.output(n, n_v_head * v_dim)?;
        let column_chunks = v_dim.div_ceil(DELTA_RULE_COLS);
        let kernel = if n >= DELTA_RULE_PREFILL_MIN_ROWS {
            Kernel::DeltaRuleScan
        } else {
            Kernel::DeltaRule
        };
        self.record(
            kernel,
            &[
                n_k_head as u32,
                n_v_head as u32,
                k_dim as u32,
                v_dim as u32,
                n as u32,
                column_chunks as u32,
                raw as u32,
                0,
            ],
            &[
                &q.buffer,
                &k.buffer,
                &v.buffer,
                &gate.buffer,
                &strength.buffer,
                &state.buffer,
                &out.buffer,
                &gate_params[0].buffer,
                &gate_params[1].buffer,
            ],
            n_v_head * column_chunks,
            f32_bytes(&[q, k, v, gate, strength, state]),
        )?;
        Ok(out)
    }
}
