/**
 * makeManyScanJpeg writes a valid progressive JPEG of a flat grey image whose every AC coefficient
 * is sent in its own scan with the most successive-approximation steps the format allows: 63 x 14
 * AC scans per component after one DC scan (with 3 components, 2,647 scans, as issue 29's
 * finding 3). The scans carry almost no data (runs of empty blocks), so the file is small, yet a
 * decoder passes over every block of the component once per scan. `acBits` fewer than 14 gives
 * fewer scans (1 to 14 per coefficient).
 */
export function makeManyScanJpeg(width: number, height: number, options: { components?: 1 | 3; acBits?: number } = {}): Buffer {
  const nf = options.components ?? 3;
  const acBits = options.acBits ?? 14;
  const out: number[] = [0xff, 0xd8];
  const segment = (marker: number, body: number[]) => out.push(0xff, marker, (body.length + 2) >> 8, (body.length + 2) & 0xff, ...body);
  // Quantisation table 0: all ones.
  segment(0xdb, [0x00, ...new Array(64).fill(1)]);
  // Progressive Huffman frame, 8-bit, no subsampling, every component on table 0.
  const sof = [8, height >> 8, height & 0xff, width >> 8, width & 0xff, nf];
  for (let c = 1; c <= nf; c++) sof.push(c, 0x11, 0);
  segment(0xc2, sof);
  // DC table 0: the one symbol 0 (no difference), code "0". AC table 0: EOB runs EOB0..EOB14, 4-bit codes.
  const dcCounts = [1, ...new Array(15).fill(0)];
  const acCounts = [0, 0, 0, 15, ...new Array(12).fill(0)];
  const eobSymbols = Array.from({ length: 15 }, (_, r) => r << 4);
  segment(0xc4, [0x00, ...dcCounts, 0x00, 0x10, ...acCounts, ...eobSymbols]);

  const blocks = Math.ceil(width / 8) * Math.ceil(height / 8);
  const bits = new BitWriter();
  const scan = (components: number[], ss: number, se: number, ah: number, al: number, entropy: () => void) => {
    const body = [components.length];
    for (const c of components) body.push(c, 0x00);
    body.push(ss, se, (ah << 4) | al);
    segment(0xda, body);
    entropy();
    for (const b of bits.flush()) out.push(b);
  };
  // DC first scan, interleaved: every block's difference is 0 (mid grey).
  scan(
    Array.from({ length: nf }, (_, i) => i + 1),
    0,
    0,
    0,
    0,
    () => {
      for (let i = 0; i < blocks * nf; i++) bits.put(0, 1);
    },
  );
  // Each AC coefficient of each component: a first scan at the coarsest step, then refinements.
  const eobRuns = () => {
    for (let left = blocks; left > 0; ) {
      const run = Math.min(left, 0x7fff);
      const r = 31 - Math.clz32(run);
      bits.put(r, 4); // the code of symbol EOBr is r in 4 bits (codes assigned in symbol order)
      bits.put(run - (1 << r), r);
      left -= run;
    }
  };
  for (let c = 1; c <= nf; c++)
    for (let k = 1; k < 64; k++) for (let al = acBits - 1; al >= 0; al--) scan([c], k, k, al === acBits - 1 ? 0 : al + 1, al, eobRuns);
  out.push(0xff, 0xd9);
  return Buffer.from(out);
}

/** BitWriter packs Huffman bits into bytes, with JPEG's 0xFF stuffing and 1-bit padding. */
class BitWriter {
  private bytes: number[] = [];
  private acc = 0;
  private n = 0;

  put(value: number, count: number): void {
    for (let i = count - 1; i >= 0; i--) {
      this.acc = (this.acc << 1) | ((value >> i) & 1);
      if (++this.n === 8) this.emit();
    }
  }

  flush(): number[] {
    if (this.n > 0) this.put((1 << (8 - this.n)) - 1, 8 - this.n);
    const b = this.bytes;
    this.bytes = [];
    return b;
  }

  private emit(): void {
    this.bytes.push(this.acc);
    if (this.acc === 0xff) this.bytes.push(0x00);
    this.acc = 0;
    this.n = 0;
  }
}
