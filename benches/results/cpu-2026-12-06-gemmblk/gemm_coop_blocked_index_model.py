# Index model of gemm_coop_blocked.wgsl: every element a cooperative load sees is checked
# against the (token or row, column) it must hold, and every output written once where it must.
import sys
def run(T, R, P, part_rows, first_in_weight, out_cols, cols):
    SG=32; BLOCK=16; ST=2*BLOCK; SR=4*BLOCK; TG=T//ST; THREADS=TG*(R//SR)*SG
    DEPTH=32; TS=DEPTH//2+4; RP=DEPTH//8; XF=T*RP//THREADS; WF=R*RP//THREADS
    assert XF*THREADS==T*RP and WF*THREADS==R*RP
    XP=T*TS; BUF=(T+R)*TS; G=8
    padded_cols=-(-cols//64)*64
    xrows=-(-P//128)*128; wrows=-(-part_rows//128)*128
    # scratch as quads (vec4<f16>): element q of row r holds halves 4q..4q+3
    def xquad(flat):  # flat quad index -> list of 4 halves labels
        r, q = divmod(flat, padded_cols//4)
        assert r < xrows
        return [('x', r, 4*q+h) if (r < P and 4*q+h < cols) else 0 for h in range(4)]
    def wquad(flat):
        r, q = divmod(flat, padded_cols//4)
        assert r < wrows
        return [('w', r, 4*q+h) if (r < part_rows and 4*q+h < cols) else 0 for h in range(4)]
    row_tiles = wrows//R; token_tiles = -(-P//T); tiles=row_tiles*token_tiles
    written={}
    for wid in range(tiles+3):  # a few past: the folded grid's extras
        live = wid < tiles; tile=min(wid,tiles-1)
        tt_ = tiles//row_tiles; gt=G*row_tiles; gf=tile//gt*G; gw=min(G,tt_-gf); ig=tile%gt
        first_row=ig//gw*R; first_token=(gf+ig%gw)*T
        tiles_mem=[None]*(2*BUF)
        steps=padded_cols//DEPTH
        def fetch(step):
            regs=[]
            rq=padded_cols//4; k=step*(DEPTH//4)
            for lid in range(THREADS):
                xs=[];ws=[]
                for j in range(XF):
                    i=lid+j*THREADS; at=(first_token+i//RP)*rq+k+2*(i%RP)
                    xs.append((xquad(at),xquad(at+1)))
                for j in range(WF):
                    i=lid+j*THREADS; at=(first_row+i//RP)*rq+k+2*(i%RP)
                    ws.append((wquad(at),wquad(at+1)))
                regs.append((xs,ws))
            return regs
        def store(buffer, regs, step):
            x_at=buffer*BUF; w_at=x_at+XP
            banks_per_turn={}
            for lid in range(THREADS):
                xs,ws=regs[lid]
                for (base,fetched,F) in ((x_at,xs,XF),(w_at,ws,WF)):
                    for j in range(F):
                        i=lid+j*THREADS; piece=i%RP; at=base+i//RP*TS+4*piece
                        low,high=fetched[j]
                        for turn in range(4):
                            pair=(turn+piece)%4
                            quad = high if pair>=2 else low
                            val = quad[2:4] if pair%2==1 else quad[0:2]
                            assert at+pair < (buffer+1)*BUF
                            tiles_mem[at+pair]=(step,tuple(val))
                            key=(base==x_at, j, lid//32, turn)
                            banks_per_turn.setdefault(key,[]).append((at+pair)%32)
            for key,b in banks_per_turn.items():
                assert len(set(b))==len(b)==32, ("bank conflict", key, b)
        def load(off, stride, row_major, step):
            # 16x16 f16 from pair offset; A row-major (m,k), B column-major (k,n): returns [a][b]
            out=[[None]*16 for _ in range(16)]
            for a in range(16):
                for b in range(16):
                    if row_major: m,k=a,b; pair=off+m*stride+k//2; half=k%2
                    else: k,n=a,b; pair=off+n*stride+k//2; half=k%2
                    s,v=tiles_mem[pair]
                    assert s==step, ("stale buffer", s, step)
                    out[a][b]=v[half]
            return out
        regs=fetch(0); store(0,regs,0)
        for step in range(steps):
            more=step+1<steps
            if more: nxt=fetch(step+1)
            base=(step%2)*BUF
            for sg in range(THREADS//32):
                token=(sg%TG)*ST; row=(sg//TG)*SR
                a_at=token*TS; b_at=XP+row*TS; nx=BLOCK*TS
                for k in range(0, DEPTH//2, BLOCK//2):
                    col0=step*DEPTH+2*k
                    for i in range(2):
                        A=load(base+a_at+k+i*nx, TS, True, step)
                        for m in range(16):
                            for kk in range(16):
                                t=first_token+token+16*i+m; c=col0+kk
                                want=('x',t,c) if (t<P and c<cols) else 0
                                assert A[m][kk]==want,(A[m][kk],want)
                    for j in range(4):
                        B=load(base+b_at+k+j*nx, TS, False, step)
                        for kk in range(16):
                            for n in range(16):
                                r=first_row+row+16*j+n; c=col0+kk
                                want=('w',r,c) if (r<part_rows and c<cols) else 0
                                assert B[kk][n]==want,(B[kk][n],want)
            if more: store((step+1)%2, nxt, step+1)
        # output
        inside = live and first_token+T<=P and first_row+R<=part_rows and out_cols%4==0 and first_in_weight%4==0
        for sg in range(THREADS//32):
            token=(sg%TG)*ST; row=(sg//TG)*SR
            t0=first_token+token; r0=first_row+row
            for i in range(2):
                for j in range(4):
                    for m in range(16):
                        for n in range(16):
                            t=t0+16*i+m; r=r0+16*j+n
                            if inside:
                                at=t0*out_cols+first_in_weight+r0 + i*16*out_cols + j*16
                                idx=at+m*out_cols+n
                            elif live and t<P and r<part_rows:
                                idx=t*out_cols+first_in_weight+r
                            else: continue
                            assert idx not in written,("twice",idx)
                            assert idx < P*out_cols
                            written[idx]=(t,r)
    for t in range(P):
        for r in range(part_rows):
            idx=t*out_cols+first_in_weight+r
            assert written.get(idx)==(t,r),(t,r,written.get(idx))
    assert len(written)==P*part_rows
for T,R in [(64,128),(128,64),(128,128)]:
    for P in [1,7,129,300,1100]:
        for part_rows, first, cols in [(200,0,100),(100,200,512 if P<300 else 64)]:
            run(T,R,P,part_rows,first,300,cols)
    print(T,R,"ok",flush=True)
