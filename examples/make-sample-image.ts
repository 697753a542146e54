/**
 * Writes examples/sample-palm.jpg: a synthetic, drawn palm (no photograph) for the README's
 * curl example. Run: node --import tsx examples/make-sample-image.ts
 */
import sharp from "sharp";

const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="480" height="640" viewBox="0 0 480 640">
  <defs>
    <radialGradient id="skin" cx="50%" cy="55%" r="60%">
      <stop offset="0%" stop-color="#f1c7a8"/><stop offset="100%" stop-color="#d9a17f"/>
    </radialGradient>
  </defs>
  <rect width="480" height="640" fill="#3b4a5a"/>
  <g fill="url(#skin)">
    <rect x="95" y="40" width="62" height="250" rx="31"/>
    <rect x="165" y="10" width="64" height="270" rx="32"/>
    <rect x="237" y="20" width="64" height="262" rx="32"/>
    <rect x="309" y="60" width="58" height="230" rx="29"/>
    <rect x="330" y="300" width="70" height="200" rx="35" transform="rotate(-35 365 400)"/>
    <ellipse cx="235" cy="390" rx="160" ry="200"/>
    <rect x="150" y="520" width="170" height="140"/>
  </g>
  <g fill="none" stroke="#9c5f4b" stroke-width="5" stroke-linecap="round" opacity="0.85">
    <path d="M 95 300 C 170 270 280 265 380 300"/>
    <path d="M 100 345 C 170 340 250 360 330 395"/>
    <path d="M 190 305 C 150 380 150 470 205 560"/>
  </g>
</svg>`;

await sharp(Buffer.from(svg)).jpeg({ quality: 85 }).toFile(new URL("./sample-palm.jpg", import.meta.url).pathname);
console.log("wrote examples/sample-palm.jpg");
